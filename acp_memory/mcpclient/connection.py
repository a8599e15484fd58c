"""One MCP server of a session, reached through the official `mcp` SDK: started in a task of
its owner's group, its tools listed once it answers, gone when it exits or is stopped.

The whole life of a connection is one task, so the SDK's transport (a child process, an HTTP
client) is entered and left in the same task, and stopping it (its cancel scope) runs the
SDK's bounded shutdown: stdin closed, then the process group killed. A stdio server that exits
on end of input is spared that kill, so once the transport is left its family (process group,
session, and what inherited its mark) is ended and reaped here: no process outlives it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp import types as mcp_types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from acp_memory import __version__
from acp_memory.clock import Clock
from acp_memory.mcpclient.specs import ServerSpec, masked_urls
from acp_memory.mcpclient.stderr import LastWords, stderr_to_log
from acp_memory.tasks.reaper import end_family, exited, spawned_with

log = logging.getLogger(__name__)

CLIENT_INFO = mcp_types.Implementation(name="acp-memory", version=__version__)
# A tools/list that pages for ever is cut here.
MAX_TOOL_PAGES = 100
# mcp.call_timeout_seconds's default, for a connection made without the config (doctor).
CALL_TIMEOUT_SECONDS = 120.0
# In a stdio server's environment, so its descendants are found even after a setsid.
MARK_VARIABLE = "ACP_MEMORY_MCP_SERVER"
# Why a server whose output does not decode is dropped at once, rather than at the timeout.
NOT_UTF8 = "its output is not UTF-8"
EXITED_AT_START = "the server exited before it answered"
# A dead server's last stderr line, quoted in its failure, is cut here.
LAST_WORDS_CHARS = 200

Item = SessionMessage | Exception


class _NoTraceback(logging.Filter):
    """The SDK's transports log what a server does wrong (each stdout line that is not
    JSON-RPC, such as a banner; a broken stream) with a traceback: one line instead, the
    error's type after it, the traceback kept for --log-level debug."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, ValidationError) and _undecodable(error):
            return False  # the server's failure says it, in one line
        if error is not None and not log.isEnabledFor(logging.DEBUG):
            record.msg, record.args = f"{record.getMessage()} ({type(error).__name__})", ()
            record.exc_info = record.exc_text = None
        return True


for _sdk in ("mcp.client.stdio", "mcp.client.sse", "mcp.client.streamable_http"):
    logging.getLogger(_sdk).addFilter(_NoTraceback())


def timed_out(seconds: float) -> str:
    """The reason a server that did not answer within the start timeout is left out."""
    return f"did not start within {seconds:g} s (mcp.startup_timeout_seconds)"


class CallFailed(Exception):
    """A tools/call that got no result: the server is gone, answered with an error, or gave
    no answer within the call timeout."""


class ServerConnection:
    """One server: `start()` it in a task group, wait for `settled`, then read `tools` and
    `call()` them while `alive`; `failure` says why it is not (or no longer) usable."""

    def __init__(
        self,
        spec: ServerSpec,
        cwd: Path,
        startup_timeout: float,
        call_timeout: float = CALL_TIMEOUT_SECONDS,
        clock: Callable[[], Clock] = Clock,
    ) -> None:
        self.spec = spec
        self.cwd = cwd
        self.startup_timeout = startup_timeout
        self.call_timeout = call_timeout
        self.clock = clock  # the runner's, which tests replace: read at every call
        self.tools: list[mcp_types.Tool] = []
        self.failure: str | None = None
        self.started = False  # it answered initialize and tools/list once
        self.reported = False  # its failure was told to the user
        self.settled = anyio.Event()  # started, or failed to
        self.ended = anyio.Event()  # its task returned: its process is gone
        self._session: ClientSession | None = None
        self._scope = anyio.CancelScope()
        self._mark = f"{MARK_VARIABLE}={secrets.token_hex(8)}"
        self._leader: int | None = None  # a stdio server's pid, once it answered
        self._last_words = LastWords()  # a stdio server's last stderr line

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def alive(self) -> bool:
        return self._session is not None and self.failure is None

    def start(self, group: TaskGroup) -> None:
        """Connect in a task of `group` (the runner's, which outlives any one request)."""
        group.start_soon(self._run)

    def stop(self) -> None:
        """Disconnect: the task ends, the SDK stopping the server's process (shielded)."""
        self._scope.cancel()

    def give_up(self, reason: str) -> None:
        """Count it failed now, warning once (a turn waited for it long enough), and stop it."""
        self._fail(reason)
        self.stop()

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call one of the server's tools by its own name; CallFailed when no result comes,
        the call timeout included (the server told it is cancelled, and kept)."""
        session = self._session
        if session is None or self.failure is not None:
            raise CallFailed(f"MCP server {self.name} is not running ({self.failure or 'stopped'})")
        heard = anyio.Event()
        silent = False

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            heard.set()  # a word from the server: its clock starts again

        async def watch(cancel: anyio.CancelScope) -> None:
            nonlocal heard, silent
            while True:
                with self.clock().move_on_after(self.call_timeout):
                    await heard.wait()
                    heard = anyio.Event()
                    continue
                silent = True
                cancel.cancel()  # the SDK sends notifications/cancelled on the way out
                return

        failure: str | None = None
        error: Exception | None = None  # raised as it is, not in the task group's group
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, tg.cancel_scope)
            try:
                result = await session.call_tool(tool, arguments, progress_callback=progress)
            except MCPError as exc:
                failure = exc.error.message
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                failure = f"the connection failed ({exc})"
            except Exception as exc:
                error = exc
            tg.cancel_scope.cancel()
        if silent:
            failure = f"{tool} gave no answer within {self.call_timeout:g} s"
        if failure is not None:
            raise CallFailed(f"MCP server {self.name}: {failure}")
        if error is not None:
            raise error
        return result

    async def _run(self) -> None:
        try:
            with self._scope:
                await self._connect_and_serve()
        except Exception as exc:  # whatever the SDK or the transport raises, one line
            reason = _reason(exc)
            if reason == EXITED_AT_START and self._last_words.line:
                # Its stderr is in the log, below debug on a terminal: quote why it died.
                reason = f"{reason}: {self._last_words.line[:LAST_WORDS_CHARS]}"
            self._fail(masked_urls(reason).partition("\n")[0])
        finally:
            self._session = None
            if self.failure is None:
                self.failure = "stopped"
            self.settled.set()
            if self.spec.type == "stdio":
                await end_family(self._leader, self._mark)  # shielded, bounded
            self.ended.set()

    async def _connect_and_serve(self) -> None:
        # One scope bounds the start (spawning or connecting, initialize, tools/list) and is
        # lifted once the server answered: the transport's own scopes stay nested within it.
        with anyio.CancelScope(deadline=anyio.current_time() + self.startup_timeout) as bound:
            async with self._transport() as (read, write):
                # The server's messages pass through here, so its end (EOF) is seen at once.
                relay_send, relay_receive = anyio.create_memory_object_stream[Item](0)
                gone = anyio.Event()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._relay, read, relay_send, gone)
                    async with ClientSession(relay_receive, write, client_info=CLIENT_INFO) as s:
                        await s.initialize()
                        self.tools = await _list_tools(s)
                        bound.deadline = math.inf
                        if self.spec.type == "stdio":
                            self._leader = await anyio.to_thread.run_sync(spawned_with, self._mark)
                            if self._leader is not None:
                                # Its children may hold its stdout open: EOF would never come.
                                tg.start_soon(_set_on_exit, self._leader, gone)
                        self._session, self.started = s, True
                        self.settled.set()
                        log.info("MCP server %s: %d tools", self.name, len(self.tools))
                        await gone.wait()
                        # Dead from now on, while the SDK still winds the process down.
                        self._session = None
                        self._fail(
                            "the server exited" if self.spec.type == "stdio" else "disconnected"
                        )
                    tg.cancel_scope.cancel()
        if bound.cancelled_caught:
            self._fail(timed_out(self.startup_timeout))

    async def _relay(
        self, source: Any, sink: MemoryObjectSendStream[Item], gone: anyio.Event
    ) -> None:
        """Pass the server's messages on; when they end (the process exited), or a line is
        not UTF-8 (the server is failed at once), say so."""
        try:
            async with sink:
                async for item in source:
                    if _undecodable(item):
                        self._fail(NOT_UTF8)
                        return
                    await sink.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            gone.set()

    def _fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason
            log.warning("MCP server %s: %s", self.name, reason)
        self.settled.set()  # a turn waiting for it need not wait for its process to end

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        spec = self.spec
        if spec.type == "stdio":
            # Undecodable bytes read as U+FFFD, so the relay sees them at once; strict
            # decoding would hold the reader until the start timeout.
            name, _, value = self._mark.partition("=")
            params = StdioServerParameters(
                command=spec.command,
                args=list(spec.args),
                env={**spec.env, name: value},
                cwd=self.cwd,
                encoding_error_handler="replace",
            )
            return _stdio(spec.name, params, self._last_words)
        if spec.type == "sse":
            return sse_client(spec.url, headers=dict(spec.headers))
        return _streamable_http(spec)


@contextlib.asynccontextmanager
async def _stdio(
    name: str, params: StdioServerParameters, last: LastWords
) -> AsyncIterator[Any]:
    # The server's stderr goes to the log as `mcp <name>: …`, never unprefixed onto ours.
    async with stderr_to_log(name, last) as errlog, stdio_client(
        params, errlog=errlog
    ) as streams:
        yield streams


@contextlib.asynccontextmanager
async def _streamable_http(spec: ServerSpec) -> AsyncIterator[Any]:
    # The SDK takes headers only through a client of our making (its default timeouts).
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with httpx2.AsyncClient(headers=dict(spec.headers), timeout=timeout) as client:
        async with streamable_http_client(spec.url, http_client=client) as streams:
            yield streams


async def _set_on_exit(pid: int, gone: anyio.Event) -> None:
    await exited(pid)
    gone.set()


def _undecodable(item: Item) -> bool:
    """A stdout line that did not parse and held bytes that are not UTF-8 (read as U+FFFD)."""
    if not isinstance(item, ValidationError):
        return False
    return any("\ufffd" in str(error.get("input", "")) for error in item.errors())


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _reason(exc: BaseException) -> str:
    """Why a start failed, in one line: the SDK's error, the OS's, or the exception's."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _reason(exc.exceptions[0])
    if isinstance(exc, MCPError):
        message = exc.error.message
        return EXITED_AT_START if message == "Connection closed" else message
    if isinstance(exc, FileNotFoundError):
        return f"cannot run {exc.filename or 'its command'}: no such file"
    if isinstance(exc, OSError):
        return f"cannot start: {exc.strerror or exc}"
    if isinstance(exc, httpx2.HTTPError):
        return f"cannot connect: {exc}"
    return f"{type(exc).__name__}: {exc}"

