"""Shared pieces for the turn tests: a config aimed at a fake model server, the agent built
over a real ProviderHub (so every request crosses loopback HTTP), test tools and a clock."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
from acp import text_block
from fakes.httpserver import Recorded
from gated import Gate
from harness import Editor, in_process_agent

from acp_memory.acp.agent import AcpAgent
from acp_memory.acp.server import build_agent
from acp_memory.config import Paths
from acp_memory.config.models import (
    AgentConfig,
    Config,
    ModelConfig,
    PromptsConfig,
    ProviderConfig,
)
from acp_memory.engine.prompt import TURN_CONTEXT_NOTE, TURN_CONTEXT_OPEN
from acp_memory.llm.registry import ProviderHub
from acp_memory.tools.base import ToolContext, ToolKind, ToolResult

# A key shaped like a real one, so a leak anywhere is easy to grep for.
API_KEY = "sk-fake-0123456789abcdefSECRET"
MODEL_ID = "fake/m"
START = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
PROMPT_BOUND_S = 10


def fake_config(
    base_url: str,
    *,
    provider_type: str = "openai",
    max_turns: int = 8,
    prompts_dir: str = "",
    **agent: Any,
) -> Config:
    """A config whose only model is served by the fake at base_url; no retry waits."""
    return Config(
        providers=[
            ProviderConfig(name="fake", type=provider_type, api_base=base_url, api_key=API_KEY)
        ],
        models=[ModelConfig(model=MODEL_ID, max_tokens=256)],
        agent=AgentConfig(
            model=MODEL_ID, max_turns=max_turns, llm_retry_max=0, llm_retry_base_ms=0, **agent
        ),
        prompts=PromptsConfig(dir=prompts_dir),
    )


class TickingClock:
    """Each call is one minute after the previous one: every turn context must differ."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> datetime:
        self.calls += 1
        return START + timedelta(minutes=self.calls)

    @staticmethod
    def stamp(call: int) -> str:
        """The time the n-th call (1-based) renders in the turn context."""
        return (START + timedelta(minutes=call)).strftime("%Y-%m-%dT%H:%M:%SZ")


class HoldTool(Gate):
    """A workspace-changing tool (agent mode only) that runs until released or cancelled."""

    name = "hold"
    description = "Wait for the test to release it."
    kind: ToolKind = "execute"
    read_only = False
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"label": {"type": "string"}},
        "required": ["label"],
        "additionalProperties": False,
    }


    def title(self, args: Mapping[str, Any]) -> str:
        return f"Hold {args.get('label', '')}"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        await self.hold()
        return ToolResult(f"released {args['label']}")


@contextlib.asynccontextmanager
async def turn_agent(
    cfg: Config, paths: Paths, *tools: Any
) -> AsyncIterator[tuple[Editor, AcpAgent]]:
    """The real agent (real providers over httpx) served to the SDK client in process."""
    async with ProviderHub(cfg) as hub:
        agent = build_agent(cfg, paths, hub)
        agent.runner.engine.clock = TickingClock()
        for tool in tools:
            agent.runner.engine.tools.add(tool)
        async with in_process_agent(cfg, paths, agent) as ed:
            yield ed, agent


async def prompt(ed: Editor, session_id: str, text: str) -> str:
    """Send one prompt and return its stopReason (bounded: a hung turn fails the test)."""
    with anyio.fail_after(PROMPT_BOUND_S):
        resp = await ed.conn.prompt(session_id=session_id, prompt=[text_block(text)])
    return resp.stop_reason


def updates_of(ed: Editor, session_id: str, kind: str) -> list[Any]:
    """The session/update payloads of one kind the editor received for a session."""
    return [u for s, u in ed.client.updates if s == session_id and u.session_update == kind]


def wire_messages(request: Recorded) -> list[str]:
    """Each message of a recorded request as its JSON text, in order."""
    return [json.dumps(m, ensure_ascii=False) for m in request.messages]


def assert_prefix_stable(requests: list[Recorded]) -> None:
    """Each request repeats the previous one byte for byte up to its turn-context tail."""
    for n, (prev, cur) in enumerate(pairwise(requests), start=1):
        before, after = wire_messages(prev), wire_messages(cur)
        stable = before[:-1]  # all but the previous turn context
        assert after[: len(stable)] == stable, f"request {n + 1} rewrote request {n}'s prefix"
        assert len(after) > len(stable) + 1, f"request {n + 1} added nothing new"


def is_turn_context(message: Mapping[str, Any]) -> bool:
    """Whether a wire or stored message carries a turn-context block (the templates only
    mention the tag, so a mention is not a block)."""
    content = message.get("content")
    texts = [content] if isinstance(content, str) else [b.get("text", "") for b in content or []]
    return any(t.lstrip().startswith(TURN_CONTEXT_OPEN) for t in texts)


def turn_context_text(request: Recorded) -> str:
    """The last message's text (OpenAI string content, or Anthropic text blocks)."""
    content = request.messages[-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content)


def check_turn_context(text: str) -> None:
    """Opens with the tag and the runtime-state line, then its sections, and closes."""
    lines = text.splitlines()
    assert lines[0] == f"{TURN_CONTEXT_OPEN} {TURN_CONTEXT_NOTE}"
    assert "## Current time (UTC)" in lines and "## Background tasks" in lines
    assert lines[-1] == "</turn_context>"


def stored_messages(paths: Paths, session_id: str) -> list[dict[str, Any]]:
    """messages.json of a session bundle."""
    bundle = paths.sessions_dir / session_id / "messages.json"
    data: dict[str, Any] = json.loads(bundle.read_text())
    return list(data["messages"])


def bundle_files(paths: Paths) -> list[Path]:
    return [p for p in paths.sessions_dir.rglob("*") if p.is_file()]
