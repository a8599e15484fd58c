"""An image an MCP tool returned reaches a model configured `vision: true` as an image: after
the tool results as a user message for OpenAI (a tool message carries text alone), inside the
tool_result for Anthropic; a model without vision reads the line naming it."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from engine.turnkit import fake_config, prompt, turn_agent
from fakes.anthropic_server import FakeAnthropic
from fakes.mcp_servers import PICTURE
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from mcptools.mcpkit import stdio_server

from acp_memory.config import Config, Paths
from acp_memory.llm.openai import TOOL_IMAGES

pytestmark = pytest.mark.anyio

PICTURE_B64 = base64.b64encode(PICTURE).decode()
NAMED = f"[image: image/png, {len(PICTURE)} bytes]"


async def picture_turn(server: Any, cfg: Config, paths: Paths) -> list[dict[str, Any]]:
    """One turn in which the model calls the fake server's picture tool; the messages of the
    request after it."""
    server.script(tool_calls(call("mcp__fake__picture", {})), text("A picture."))
    cfg.tools.permission_mode = "bypass"
    async with turn_agent(cfg, paths) as (ed, _):
        await ed.conn.initialize(protocol_version=1)
        new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
        assert await prompt(ed, new.session_id, "draw") == "end_turn"
    return server.requests[1].json["messages"]


@pytest.mark.parametrize("vision", [True, False])
async def test_an_openai_model_sees_the_image_after_the_tool_result_if_it_takes_images(
    paths, vision
):
    async with FakeOpenAI() as server:
        cfg = fake_config(server.base_url)
        cfg.models[0].vision = vision
        messages = await picture_turn(server, cfg, paths)
    (at,) = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    assert messages[at]["content"] == NAMED
    following = messages[at + 1]
    if not vision:
        assert TOOL_IMAGES not in str(following)
        return
    assert following["role"] == "user"
    assert following["content"] == [
        {"type": "text", "text": TOOL_IMAGES},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PICTURE_B64}"}},
    ]


async def test_an_anthropic_model_sees_the_image_inside_the_tool_result(paths):
    async with FakeAnthropic() as server:
        cfg = fake_config(server.base_url, provider_type="anthropic")
        cfg.models[0].vision = True
        messages = await picture_turn(server, cfg, paths)
    results = [b for m in messages if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b["type"] == "tool_result"]
    (result,) = results
    assert result["content"] == [
        {"type": "text", "text": NAMED},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": PICTURE_B64}},
    ]
