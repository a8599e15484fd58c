"""`acp-memory -p TEXT`: one turn in a new session, the reply on stdout, the rest on stderr."""

from __future__ import annotations

import sys

import anyio

from acp_memory.acp.server import build_engine
from acp_memory.config import Config, Paths
from acp_memory.engine.events import AgentText, ToolCallFinished, ToolCallStarted, TurnEvent
from acp_memory.llm.registry import ProviderHub, UnknownModelError
from acp_memory.llm.types import LLMError
from acp_memory.sessions.store import SessionStore


def run_print_mode(cfg: Config, paths: Paths, text: str) -> int:
    """Run one turn; exit code 0 when the model answered, 1 when the call failed."""

    async def emit(event: TurnEvent) -> None:
        if isinstance(event, AgentText):
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif isinstance(event, ToolCallStarted):
            print(f"[tool] {event.title}", file=sys.stderr)
        elif isinstance(event, ToolCallFinished):
            print(f"[tool] {event.call_id}: {event.status}", file=sys.stderr)

    async def main() -> int:
        async with ProviderHub(cfg) as hub:
            engine = build_engine(cfg)
            session = SessionStore(paths.sessions_dir).create(
                cwd=str(paths.cwd), model_id=cfg.default_model_id()
            )
            try:
                stop = await engine.run(
                    session, text, hub.model(session.record.selected_model_id), emit
                )
            except (LLMError, UnknownModelError) as exc:
                print(f"\nacp-memory: {exc}", file=sys.stderr)
                return 1
            print()
            print(f"[{stop}] session {session.id}", file=sys.stderr)
            return 0

    return anyio.run(main)
