"""Images in prompts: to a model configured `vision: true` in its provider's format, kept in
the transcript for every later request, replayed by session/load; refused (-32602, nothing
recorded) for a model without it; counted by the offline model; marked for the memory child."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import anyio
import pytest
from acp import RequestError, image_block, text_block
from engine.turnkit import MODEL_ID, fake_config, prompt, stored_messages, turn_agent
from fakes.anthropic_server import FakeAnthropic
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from harness import Editor, in_process_agent

from acp_memory.config import Config
from acp_memory.config.models import MemoryConfig, ModelConfig

pytestmark = pytest.mark.anyio

PICTURE = b"\x89PNG\r\n\x1a\n-a-tiny-cat-"
DATA = base64.b64encode(PICTURE).decode()
BLIND_ID = "fake/blind"


def vision_config(base_url: str, provider_type: str = "openai") -> Config:
    """The fake's model with vision, and a second one of the same server without it."""
    cfg = fake_config(base_url, provider_type=provider_type)
    cfg.models = [
        ModelConfig(model=MODEL_ID, max_tokens=256, vision=True),
        ModelConfig(model=BLIND_ID, max_tokens=256),
    ]
    return cfg


async def ask_with_image(ed: Editor, sid: str) -> str:
    """A prompt of a question then the picture; its stopReason."""
    blocks = [text_block("What is this?"), image_block(DATA, "image/png")]
    with anyio.fail_after(10):
        resp = await ed.conn.prompt(session_id=sid, prompt=blocks)
    return resp.stop_reason


def _first_user(body: dict[str, Any]) -> Any:
    return next(m for m in body["messages"] if m["role"] == "user")


def _no_breakpoints(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(content)
    for block in out:
        block.pop("cache_control", None)
    return out


async def _replayed(cfg: Config, paths: Any, sid: str) -> list[Any]:
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
        return [u for s, u in ed.client.updates if s == sid]


async def test_an_image_reaches_an_openai_model_as_a_data_url_on_every_later_request(paths):
    (paths.cwd / "a.md").write_text("cats\n")
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("read_file", {"path": "a.md"})),
            text("A cat."),
            text("Still a cat."),
        )
        cfg = vision_config(server.base_url)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await ask_with_image(ed, sid) == "end_turn"
            assert await prompt(ed, sid, "And now?") == "end_turn"
    expected = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{DATA}"}},
    ]
    # The turn's second request (after the tool) and the next turn's send it again.
    assert len(server.requests) == 3
    assert [_first_user(r.json)["content"] for r in server.requests] == [expected] * 3
    [first] = [m for m in stored_messages(paths, sid) if m["role"] == "user"][:1]
    assert first["content"] == "What is this?\n\n[image]"
    replayed = await _replayed(cfg, paths, sid)
    chunks = [u.content for u in replayed if u.session_update == "user_message_chunk"]
    assert [c.type for c in chunks] == ["text", "image", "text"]
    assert chunks[0].text == "What is this?" and chunks[2].text == "And now?"
    assert (chunks[1].data, chunks[1].mime_type) == (DATA, "image/png")


async def test_an_image_reaches_an_anthropic_model_as_a_base64_source(paths):
    async with FakeAnthropic() as server:
        server.script(text("A cat."))
        cfg = vision_config(server.base_url, provider_type="anthropic")
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await ask_with_image(ed, sid) == "end_turn"
    [request] = server.requests
    assert _no_breakpoints(_first_user(request.json)["content"]) == [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": DATA}},
    ]


async def test_a_model_selected_after_the_image_without_vision_reads_its_mark(paths):
    async with FakeOpenAI() as server:
        server.script(text("A cat."), text("Some picture."))
        cfg = vision_config(server.base_url)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await ask_with_image(ed, sid) == "end_turn"
            await ed.conn.set_config_option(session_id=sid, config_id="model", value=BLIND_ID)
            assert await prompt(ed, sid, "Again?") == "end_turn"
    blind = server.requests[1].json
    assert blind["model"] == "blind"
    assert _first_user(blind)["content"] == "What is this?\n\n[image]"


async def test_an_image_to_a_model_without_vision_is_refused_and_nothing_is_recorded(paths):
    async with FakeOpenAI() as server:
        cfg = vision_config(server.base_url)
        cfg.agent.model = BLIND_ID
        cfg.memory = MemoryConfig(enable=True, wait_seconds=5)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            with pytest.raises(RequestError) as err:
                await ask_with_image(ed, sid)
    assert err.value.code == -32602
    assert BLIND_ID in str(err.value) and "vision" in str(err.value)
    assert server.requests == []
    bundle = paths.sessions_dir / sid
    assert stored_messages(paths, sid) == []
    assert not (bundle / "subagents").exists() and not (bundle / "background").exists()


async def test_an_image_whose_data_is_not_base64_is_refused_naming_the_block(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        with pytest.raises(RequestError) as err:
            await ed.conn.prompt(
                session_id=sid, prompt=[text_block("x"), image_block("not base64!", "image/png")]
            )
    assert err.value.code == -32602 and "prompt[1].data" in str(err.value)


async def test_an_image_block_whose_type_is_not_an_image_is_refused_naming_it(cfg, paths):
    data = base64.b64encode(PICTURE).decode()
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        with pytest.raises(RequestError) as err:
            await ed.conn.prompt(session_id=sid, prompt=[image_block(data, "text/plain")])
    assert err.value.code == -32602
    assert "prompt[0].mimeType: 'text/plain' is not an image" in str(err.value)
    assert stored_messages(paths, sid) == []


async def test_the_offline_model_says_it_received_an_image_of_so_many_bytes(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        assert await ask_with_image(ed, sid) == "end_turn"
        reply = ed.client.text(sid)
    assert f"I received an image of {len(PICTURE)} bytes (image/png)." in reply.splitlines()


async def test_the_memory_childs_task_marks_where_the_image_was(paths):
    cfg = Config(memory=MemoryConfig(enable=True, wait_seconds=10))
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        blocks = [text_block("Look at this"), image_block(DATA, "image/png"), text_block("ok?")]
        with anyio.fail_after(10):
            await ed.conn.prompt(session_id=sid, prompt=blocks)
    [child] = (paths.sessions_dir / sid / "subagents").iterdir()
    messages = json.loads((child / "messages.json").read_text())["messages"]
    task = messages[0]["content"]
    assert "Look at this\n\n[image]\n\nok?" in task
    assert DATA not in json.dumps(messages)  # the child gets the mark, never the image
