"""Shared pieces for the file-tool tests: an agent on a fake model, an editor session with the
capabilities a test wants, and what the model read back from each call."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from acp.schema import ClientCapabilities, FileSystemCapabilities
from engine.turnkit import fake_config, prompt, turn_agent, updates_of
from fakes.openai_server import FakeOpenAI
from fakes.script import Reply, text
from harness import Editor

from acp_memory.acp.agent import AcpAgent
from acp_memory.config import Paths
from acp_memory.config.models import Config


def tools_config(base_url: str, permission_mode: str = "bypass", **tools: Any) -> Config:
    cfg = fake_config(base_url)
    cfg.tools = cfg.tools.model_copy(update={"permission_mode": permission_mode, **tools})
    return cfg


@contextlib.asynccontextmanager
async def scripted_agent(
    paths: Paths, *replies: Reply, permission_mode: str = "bypass", **tools: Any
) -> AsyncIterator[tuple[FakeOpenAI, Editor, AcpAgent]]:
    """The real agent on a fake model that answers `replies` in order, then "Done."."""
    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(*replies)
        cfg = tools_config(server.base_url, permission_mode, **tools)
        async with turn_agent(cfg, paths) as (ed, agent):
            yield server, ed, agent


async def open_session(ed: Editor, paths: Paths, *, fs: bool = False) -> str:
    """initialize (advertising fs/* when `fs`) and session/new in the project folder."""
    caps = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=False
    )
    await ed.conn.initialize(protocol_version=1, client_capabilities=caps)
    resp = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
    return resp.session_id


def tool_results(server: FakeOpenAI) -> list[str]:
    """Every tool result the model read, in order: the last request carries the whole history."""
    return [m["content"] for m in server.requests[-1].messages if m.get("role") == "tool"]


def finished_calls(ed: Editor, sid: str) -> list[Any]:
    """The final tool_call_update of each call (the one with a status)."""
    return [u for u in updates_of(ed, sid, "tool_call_update") if u.status is not None]


def diffs(update: Any) -> list[Any]:
    return [c for c in update.content or [] if c.type == "diff"]


__all__ = [
    "diffs",
    "finished_calls",
    "open_session",
    "prompt",
    "scripted_agent",
    "tool_results",
    "tools_config",
    "updates_of",
]
