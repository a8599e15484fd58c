"""`acp-memory demo`: spawn the agent as an editor would and print a scripted session."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from acp import RequestError, connect_to_agent, text_block
from acp.client.connection import ClientSideConnection

SCRIPT = [
    "Hello! Who are you, and what can you do without a network?",
    "My favourite fruit is the mango, and this project uses tabs for indentation.",
    # The offline model calls a tool when a line asks for it, so the loop shows without a key.
    'What does the project README say?\n/tool read_file {"path": "README.md"}',
    "What did I tell you two messages ago?",
]


class _PrintingClient:
    """Prints what the agent streams, one readable line per change of speaker."""

    def __init__(self) -> None:
        self._open: str | None = None
        self._titles: dict[str, str] = {}

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = update.session_update
        if kind in ("agent_message_chunk", "user_message_chunk", "agent_thought_chunk"):
            who = {
                "agent_message_chunk": "agent",
                "user_message_chunk": "you",
                "agent_thought_chunk": "thinking",
            }[kind]
            self._say(who, update.content.text)
        elif kind == "tool_call":
            self._titles[update.tool_call_id] = update.title
            self._line(f"  [tool] {update.title} ({update.kind})")
        elif kind == "tool_call_update":
            title = self._titles.get(update.tool_call_id, update.tool_call_id)
            self._line(f"  [tool] {title}: {update.status}")
        elif kind == "current_mode_update":
            self._line(f"  [mode] now {update.current_mode_id}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self._line(f"  [{method}] {params}")

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/request_permission")

    def _say(self, who: str, text: str) -> None:
        if self._open != who:
            self.end()
            print(f"{who:>6}: ", end="")
            self._open = who
        print(text.replace("\n", "\n        "), end="", flush=True)

    def _line(self, text: str) -> None:
        self.end()
        print(text, flush=True)

    def end(self) -> None:
        if self._open is not None:
            print(flush=True)
            self._open = None


@contextlib.asynccontextmanager
async def spawn_agent(client: Any, home: Path, cwd: Path) -> AsyncIterator[ClientSideConnection]:
    """Start `python -m acp_memory` on stdio, as an editor starts an agent server."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_memory",
        "acp",
        "--home",
        str(home),
        "--cwd",
        str(cwd),
        "--log-level",
        "warning",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        limit=64 * 1024 * 1024,
    )
    assert proc.stdin is not None and proc.stdout is not None
    conn = connect_to_agent(client, proc.stdin, proc.stdout)
    try:
        yield conn
    finally:
        proc.stdin.close()  # end of input: the agent finishes and exits by itself
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        finally:
            await conn.close()


class _DropMemoryRunNoise(logging.Filter):
    """The SDK client is a v1 client: it logs a memory_run update as an unknown variant and
    drops it, as Zed does. The demo keeps that log noise off the screen."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and "memory_run" in str(record.exc_info[1]):
            return False
        return True


async def _demo(home: Path, cwd: Path) -> None:
    client = _PrintingClient()
    logging.getLogger().addFilter(_DropMemoryRunNoise())
    print(f"home: {home}\nproject: {cwd}\n")
    async with spawn_agent(client, home, cwd) as conn:
        init = await conn.initialize(protocol_version=1)
        info = init.agent_info
        print(
            f"== initialize: {info.name if info else '?'} {info.version if info else ''}, "
            f"protocol {init.protocol_version}"
        )
        new = await conn.new_session(cwd=str(cwd), mcp_servers=[])
        sid = new.session_id
        print(f"== session/new: {sid} (mode {new.modes.current_mode_id if new.modes else '?'})\n")
        for text in SCRIPT:
            client._say("you", text)
            client.end()
            resp = await conn.prompt(session_id=sid, prompt=[text_block(text)])
            client.end()
            print(f"  [stop: {resp.stop_reason}]\n")
        await conn.set_session_mode(session_id=sid, mode_id="ask")
    print("\n== a new agent process loads the session and replays it:")
    async with spawn_agent(client, home, cwd) as conn:
        await conn.initialize(protocol_version=1)
        await conn.load_session(session_id=sid, cwd=str(cwd), mcp_servers=[])
        client.end()
    bundle = home / "sessions" / sid
    print(f"\n== the bundle on disk: {bundle}")
    for path in sorted(bundle.rglob("*")):
        # Dot files are the bundle's machinery (its lock, the transcript's spare copy).
        if path.is_file() and not path.name.startswith("."):
            print(f"   {path.relative_to(bundle)} ({path.stat().st_size} bytes)")
    print(
        textwrap.dedent("""
        Done. Point an editor at `acp-memory` (see README: Zed's agent_servers) and add a
        provider to ~/.acp-memory/config.yaml to talk to a real model.""")
    )


def run_demo(args: argparse.Namespace) -> int:
    """Run the scripted session in a throw-away home unless --home names one."""
    with tempfile.TemporaryDirectory(prefix="acp-memory-demo-") as tmp:
        home = Path(args.home) if args.home else Path(tmp) / "home"
        cwd = Path(args.cwd).absolute() if args.cwd else Path(tmp) / "project"
        if not args.cwd:
            cwd.mkdir(parents=True)
            (cwd / "README.md").write_text("# demo project\nIndent with tabs.\n")
        asyncio.run(_demo(home, cwd))
    return 0
