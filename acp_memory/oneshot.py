"""`acp-memory -p TEXT`: one turn in a new session, the reply on stdout, the rest on stderr."""

from __future__ import annotations

import sys

import anyio

from acp_memory.acp.server import build_runner
from acp_memory.cli import describe_os_error, error
from acp_memory.config import Config, Paths
from acp_memory.engine.events import AgentText, ToolCallFinished, ToolCallStarted, TurnEvent
from acp_memory.llm.registry import ProviderHub, UnknownModelError
from acp_memory.llm.types import LLMError
from acp_memory.sessions.store import SessionStore


def run_print_mode(cfg: Config, paths: Paths, text: str) -> int:
    """Run one turn; exit code 0 when the model answered, 1 when it failed, 2 for a bad model id.

    Every expected failure is one line on stderr naming the file or the model.
    """
    replied = False

    async def emit(event: TurnEvent) -> None:
        nonlocal replied
        if isinstance(event, AgentText):
            sys.stdout.write(event.text)
            sys.stdout.flush()
            replied = True
        elif isinstance(event, ToolCallStarted):
            print(f"[tool] {event.title}", file=sys.stderr)
        elif isinstance(event, ToolCallFinished):
            print(f"[tool] {event.call_id}: {event.status}", file=sys.stderr)

    async def main() -> int:
        async with ProviderHub(cfg) as hub:
            model_id = cfg.default_model_id()
            # Resolved before the bundle is made, so that a bad id leaves no empty session.
            try:
                hub.model(model_id)
            except UnknownModelError as exc:
                error(_one_line(exc))
                return 2
            runner = build_runner(cfg, paths, hub)
            try:
                session = SessionStore(paths.sessions_dir).create(
                    cwd=str(paths.cwd), model_id=model_id
                )
            except OSError as exc:
                error(describe_os_error("cannot create the session bundle", exc))
                return 1
            try:
                async with runner.running():
                    stop = await runner.run_turn(session, text, emit)
            except (LLMError, UnknownModelError) as exc:
                if replied:
                    print()  # ends the partial reply on stdout
                error(_one_line(exc))
                return 1
            print()
            print(f"[{stop}] session {session.id}", file=sys.stderr)
            return 0

    return anyio.run(main)


def _one_line(exc: Exception) -> str:
    # Provider errors may quote a multi-line response body; stderr gets one line per failure.
    return " ".join(str(exc).split())
