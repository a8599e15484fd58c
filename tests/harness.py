"""Drives acp-memory as an editor would: the official ACP client over real bytes.

In process, the agent serves one end of a socket pair and the SDK client the other; as a
subprocess, the client talks to `python -m acp_memory` over its stdio. Either way every line
the agent sends passes through a WireChecker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from acp import RequestError, connect_to_agent
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)
from wire_schema import WireChecker

from acp_memory.acp.agent import AcpAgent
from acp_memory.acp.server import serve
from acp_memory.config import Config, Paths
from acp_memory.jsonrpc.fdstream import FdReceiveStream, FdSendStream
from acp_memory.jsonrpc.framing import read_lines


@dataclass
class RecordingClient:
    """An editor that keeps every session/update and extension notification it receives.

    Tests script the user and the editor's files: `permission_answers` are the option ids the
    user picks, in order (None: the prompt was cancelled); with none left, the client does not
    implement session/request_permission. `buffers`, when set, are the editor's open files
    (absolute path -> text) that serve fs/read_text_file and take fs/write_text_file; when
    None, the client implements neither.
    """

    updates: list[tuple[str, Any]] = field(default_factory=list)
    # available_commands_update by session: the editor's command menu, kept apart from the
    # conversation's updates.
    commands: dict[str, list[Any]] = field(default_factory=dict)
    ext: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    permission_answers: list[str | None] = field(default_factory=list)
    permission_requests: list[tuple[str, Any, list[Any]]] = field(default_factory=list)
    buffers: dict[str, str] | None = None
    fs_calls: list[tuple[str, str]] = field(default_factory=list)  # (method, path)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if update.session_update == "available_commands_update":
            self.commands[session_id] = update.available_commands
        else:
            self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        if not self.permission_answers:
            raise RequestError.method_not_found("session/request_permission")
        self.permission_requests.append((session_id, tool_call, options))
        answer = self.permission_answers.pop(0)
        self.changed.set()
        if answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    async def read_text_file(
        self, session_id: str, path: str, **kwargs: Any
    ) -> ReadTextFileResponse:
        if self.buffers is None:
            raise RequestError.method_not_found("fs/read_text_file")
        self.fs_calls.append(("fs/read_text_file", path))
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        if self.buffers is None:
            raise RequestError.method_not_found("fs/write_text_file")
        self.fs_calls.append(("fs/write_text_file", path))
        self.buffers[path] = content
        return WriteTextFileResponse()

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self.ext.append((method, params))
        self.changed.set()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    def kinds(self, session_id: str | None = None) -> list[str]:
        return [u.session_update for s, u in self.updates if session_id is None or s == session_id]

    def text(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u.content.text for s, u in self.updates if s == session_id and u.session_update == kind
        )

    async def wait_for(self, predicate: Any, timeout: float = 10) -> None:
        with anyio.fail_after(timeout):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()


class _TappedSend(FdSendStream):
    def __init__(self, fd: int, checker: WireChecker) -> None:
        super().__init__(fd)
        self.checker = checker

    async def send(self, item: bytes) -> None:
        for line in item.splitlines():
            self.checker.saw_agent_line(line)
        await super().send(item)


class _TappedReceive(FdReceiveStream):
    def __init__(self, fd: int, checker: WireChecker) -> None:
        super().__init__(fd)
        self.checker = checker
        self._partial: list[bytes] = []

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await super().receive(max_bytes)
        if b"\n" not in data:
            self._partial.append(data)  # no joining until a line ends: huge lines stay linear
            return data
        head, *lines, tail = data.split(b"\n")
        for line in [b"".join([*self._partial, head]), *lines]:
            self.checker.saw_client_line(line)
        self._partial = [tail]
        return data


@dataclass
class Editor:
    conn: ClientSideConnection
    client: RecordingClient
    checker: WireChecker
    stderr: bytearray = field(default_factory=bytearray)  # a subprocess agent's, as it comes
    process: asyncio.subprocess.Process | None = None  # a subprocess agent's

    async def start_session(self, cwd: Path) -> str:
        await self.conn.initialize(protocol_version=1)
        resp = await self.conn.new_session(cwd=str(cwd), mcp_servers=[])
        return resp.session_id


@contextlib.asynccontextmanager
async def served_agent(
    cfg: Config, paths: Paths, agent: AcpAgent | None = None
) -> AsyncIterator[tuple[socket.socket, WireChecker]]:
    """The agent served in this event loop on one end of a socket pair; yields the other end.

    On exit the client side stops writing, which is end-of-input for the agent: it drains
    and returns by itself (bounded), and every message it sent must have passed the checker.
    """
    agent_sock, client_sock = socket.socketpair()
    checker = WireChecker()
    served = anyio.Event()

    async def run_agent() -> None:
        try:
            await serve(
                _TappedReceive(agent_sock.fileno(), checker),
                _TappedSend(agent_sock.fileno(), checker),
                cfg,
                paths,
                agent,
            )
        finally:
            served.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_agent)
        try:
            yield client_sock, checker
        finally:
            with contextlib.suppress(OSError):  # already closed by whoever owned it
                client_sock.shutdown(socket.SHUT_WR)
            with anyio.fail_after(15):
                await served.wait()
    agent_sock.close()
    client_sock.close()
    checker.assert_clean()


@contextlib.asynccontextmanager
async def in_process_agent(
    cfg: Config, paths: Paths, agent: AcpAgent | None = None, client: RecordingClient | None = None
) -> AsyncIterator[Editor]:
    """The agent served in this event loop, the official SDK client on the other end (a
    RecordingClient, or `client`: a subclass that serves more of the client's methods)."""
    async with served_agent(cfg, paths, agent) as (sock, checker):
        client = client or RecordingClient()
        reader, writer = await asyncio.open_connection(sock=sock)
        conn = connect_to_agent(client, writer, reader)
        try:
            yield Editor(conn, client, checker)
        finally:
            await conn.close()
            # The transport owns the socket: close it here, before its fd number can be
            # reused by the next socket pair while still registered with the event loop.
            writer.close()


@contextlib.asynccontextmanager
async def subprocess_agent(
    home: Path,
    *args: str,
    cwd: Path | None = None,
    client: RecordingClient | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[Editor]:
    """A real `python -m acp_memory` process, its stdout checked line by line (`client`: a
    RecordingClient subclass that serves more of the client's methods; `env`: added to ours)."""
    checker = WireChecker()
    client = client or RecordingClient()
    env = {**os.environ, "ACP_MEMORY_HOME": str(home), "PYTHONUNBUFFERED": "1", **(env or {})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_memory",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=cwd,
        limit=128 * 1024 * 1024,
    )
    assert proc.stdin and proc.stdout
    checked = asyncio.StreamReader(limit=128 * 1024 * 1024)

    async def pump() -> None:
        assert proc.stdout
        while line := await proc.stdout.readline():
            checker.saw_agent_line(line.rstrip(b"\n"))
            checked.feed_data(line)
            # Wakes wait_for on what the SDK client does not surface (an update it cannot
            # parse): a predicate may read checker.sent.
            client.changed.set()
        checked.feed_eof()

    stderr = bytearray()

    async def drain_stderr() -> None:
        # Read for as long as the process lives: a full pipe would block its logging.
        assert proc.stderr
        while chunk := await proc.stderr.read(65536):
            stderr.extend(chunk)

    send_to_agent = proc.stdin.write

    def write(data: bytes) -> None:
        for line in bytes(data).splitlines():
            checker.saw_client_line(line)
        send_to_agent(data)

    proc.stdin.write = write  # type: ignore[method-assign]
    conn = connect_to_agent(client, proc.stdin, checked)
    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        tg.start_soon(drain_stderr)
        try:
            yield Editor(conn, client, checker, stderr, proc)
        finally:
            proc.stdin.close()
            with anyio.fail_after(20):
                await proc.wait()
            await conn.close()
    checker.assert_clean()


class RawPeer:
    """A client that speaks bytes, for malformed-input tests."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send = FdSendStream(sock.fileno())
        self._lines = read_lines(FdReceiveStream(sock.fileno()))

    async def send(self, data: bytes) -> None:
        await self._send.send(data)

    async def send_json(self, obj: Any) -> None:
        await self.send(json.dumps(obj).encode() + b"\n")

    async def recv(self, timeout: float = 10) -> Any:
        with anyio.fail_after(timeout):
            line = await self._lines.__anext__()
        assert isinstance(line, bytes)
        return json.loads(line)

    async def call(self, method: str, params: Any, msg_id: Any = 1) -> Any:
        await self.send_json({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await self.recv()


@contextlib.asynccontextmanager
async def raw_agent(
    cfg: Config, paths: Paths, agent: AcpAgent | None = None
) -> AsyncIterator[RawPeer]:
    """The agent in this event loop, a byte-level peer on the other end of a socket pair."""
    async with served_agent(cfg, paths, agent) as (sock, _checker):
        yield RawPeer(sock)
