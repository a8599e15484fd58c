"""Editors that run terminals on local processes, for the run_command tests.

`LocalTerminals` is the Editor protocol itself (a ToolContext's editor in unit tests);
`TerminalClient` is an ACP client for the official SDK, answering terminal/* requests the
agent sends over the wire. Output goes to a file, as a terminal's scrollback would; every call
is recorded as (method, terminalId).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import connect_to_agent
from acp.schema import (
    CreateTerminalResponse,
    KillTerminalResponse,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)
from engine.turnkit import TickingClock
from harness import Editor, RecordingClient, served_agent
from tasks.procs import GRACE_S

from acp_memory.acp.agent import AcpAgent
from acp_memory.acp.server import build_agent
from acp_memory.config import Config, Paths
from acp_memory.editor import TerminalExit, TerminalOutput
from acp_memory.llm.registry import ProviderHub


@dataclass
class _Terminal:
    proc: asyncio.subprocess.Process
    out: Path
    limit: int | None
    released: bool = False


@dataclass
class Terminals:
    """Processes behind terminal ids, each in its own process group."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)
    _all: dict[str, _Terminal] = field(default_factory=dict)
    _dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="terminals-")))

    async def create(self, argv: Sequence[str], cwd: str | None, limit: int | None) -> str:
        terminal_id = f"term-{len(self._all) + 1}"
        out = self._dir / f"{terminal_id}.out"
        with out.open("wb") as sink:  # a small local file: the scrollback
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=sink,
                stderr=asyncio.subprocess.STDOUT, start_new_session=True,
            )
        self._all[terminal_id] = _Terminal(proc, out, limit)
        self.commands.append(list(argv))
        self.calls.append(("create", terminal_id))
        return terminal_id

    def _get(self, terminal_id: str) -> _Terminal:
        term = self._all[terminal_id]
        assert not term.released, f"{terminal_id} used after release"
        return term

    def output(self, terminal_id: str) -> tuple[str, bool, tuple[int | None, str | None] | None]:
        self.calls.append(("output", terminal_id))
        term = self._get(terminal_id)
        data = term.out.read_bytes()
        truncated = term.limit is not None and len(data) > term.limit
        if truncated:  # a terminal keeps the end, as ACP says
            data = data[-(term.limit or 0) :]
        return data.decode(errors="replace"), truncated, self._status(term)

    async def wait(self, terminal_id: str) -> tuple[int | None, str | None]:
        self.calls.append(("wait", terminal_id))
        term = self._get(terminal_id)
        await term.proc.wait()
        status = self._status(term)
        assert status is not None
        return status

    def kill(self, terminal_id: str) -> None:
        self.calls.append(("kill", terminal_id))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._get(terminal_id).proc.pid, signal.SIGKILL)

    def release(self, terminal_id: str) -> None:
        self.calls.append(("release", terminal_id))
        term = self._get(terminal_id)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(term.proc.pid, signal.SIGKILL)
        term.released = True

    def methods(self, terminal_id: str) -> list[str]:
        return [m for m, t in self.calls if t == terminal_id]

    def close(self) -> None:
        for term in self._all.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(term.proc.pid, signal.SIGKILL)

    @staticmethod
    def _status(term: _Terminal) -> tuple[int | None, str | None] | None:
        code = term.proc.returncode
        if code is None:
            return None
        return (None, signal.Signals(-code).name) if code < 0 else (code, None)


class LocalTerminals(Terminals):
    """The Editor protocol with terminals only (acp_memory/editor.py)."""

    can_read_files = False
    can_write_files = False
    can_run_terminals = True
    user_is_the_command_line = False

    async def read_text_file(self, session_id: str, path: str) -> str:
        raise NotImplementedError

    async def write_text_file(self, session_id: str, path: str, content: str) -> None:
        raise NotImplementedError

    async def request_permission(self, *args: Any) -> str | None:
        raise NotImplementedError

    async def create_terminal(
        self, session_id: str, command: str, cwd: str, output_byte_limit: int
    ) -> str:
        return await self.create(["sh", "-c", command], cwd, output_byte_limit)

    async def terminal_output(self, session_id: str, terminal_id: str) -> TerminalOutput:
        text, truncated, status = self.output(terminal_id)
        return TerminalOutput(text, truncated, TerminalExit(*status) if status else None)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str) -> TerminalExit:
        return TerminalExit(*await self.wait(terminal_id))

    async def kill_terminal(self, session_id: str, terminal_id: str) -> None:
        self.kill(terminal_id)

    async def release_terminal(self, session_id: str, terminal_id: str) -> None:
        self.release(terminal_id)


@dataclass
class TerminalClient(RecordingClient):
    """A RecordingClient that also answers terminal/* with local processes."""

    terminals: Terminals = field(default_factory=Terminals)

    async def create_terminal(
        self, command: str, session_id: str, args: list[str] | None = None, env: Any = None,
        cwd: str | None = None, output_byte_limit: int | None = None, **kwargs: Any,
    ) -> CreateTerminalResponse:
        terminal_id = await self.terminals.create([command, *(args or [])], cwd, output_byte_limit)
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        text, truncated, status = self.terminals.output(terminal_id)
        exit_status = None
        if status is not None:
            exit_status = TerminalExitStatus(exit_code=status[0], signal=status[1])
        return TerminalOutputResponse(output=text, truncated=truncated, exit_status=exit_status)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        code, sig = await self.terminals.wait(terminal_id)
        return WaitForTerminalExitResponse(exit_code=code, signal=sig)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        self.terminals.kill(terminal_id)
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        self.terminals.release(terminal_id)
        return ReleaseTerminalResponse()


@contextlib.asynccontextmanager
async def pool_agent(
    cfg: Config, paths: Paths, *tools: Any, client: RecordingClient | None = None
) -> AsyncIterator[tuple[Editor, AcpAgent]]:
    """The real agent over a socket pair to the SDK client (`client`, a RecordingClient by
    default), with the short kill grace of the pool tests."""
    client = client or RecordingClient()
    async with ProviderHub(cfg) as hub:
        agent = build_agent(cfg, paths, hub)
        agent.runner.kill_grace_seconds = GRACE_S
        agent.runner.engine.clock = TickingClock()
        for tool in tools:
            agent.runner.engine.tools.add(tool)
        try:
            async with served_agent(cfg, paths, agent) as (sock, checker):
                reader, writer = await asyncio.open_connection(sock=sock)
                conn = connect_to_agent(client, writer, reader)
                try:
                    yield Editor(conn, client, checker), agent
                finally:
                    await conn.close()
                    writer.close()
        finally:
            if isinstance(client, TerminalClient):
                client.terminals.close()
