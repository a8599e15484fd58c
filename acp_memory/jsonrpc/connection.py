"""A JSON-RPC 2.0 peer over newline-delimited byte streams.

Inbound requests run concurrently, each in its own task, so a long request never blocks a
notification, another request, or the answer to a request we sent. Dispatch (validation,
method lookup, standard errors) is jsonrpcserver's; framing, ids and correlation are ours.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, ByteSendStream, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from jsonrpcserver import Error, Success
from jsonrpcserver.async_main import dispatch_to_serializable
from jsonrpcserver.result import Result

from acp_memory.jsonrpc.errors import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, RpcError
from acp_memory.jsonrpc.framing import DEFAULT_MAX_LINE_BYTES, OversizedLine, read_lines

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]

# What inbound handlers may hold at once, in requests and in bytes of their lines; past either
# the reader waits (and the peer with it), which bounds memory under a burst.
MAX_IN_FLIGHT = 512
MAX_IN_FLIGHT_BYTES = 128 * 1024 * 1024
_OUTBOX = 1024
_BATCH = 256


class _Pending:
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: RpcError | None = None


class _Budget:
    """Admits handlers while both the count and the bytes they hold stay under their bounds."""

    def __init__(self, count: int, nbytes: int) -> None:
        self._max_count, self._max_bytes = count, nbytes
        self._count = self._bytes = 0
        self._freed = anyio.Event()

    async def acquire(self, size: int) -> None:
        # A single message larger than the byte bound is still admitted when nothing else is.
        while self._count >= self._max_count or (
            self._bytes and self._bytes + size > self._max_bytes
        ):
            await self._freed.wait()
        self._count += 1
        self._bytes += size

    def release(self, size: int) -> None:
        self._count -= 1
        self._bytes -= size
        self._freed.set()
        self._freed = anyio.Event()


class Connection:
    """One JSON-RPC peer: serve() reads until the input ends; request()/notify() send."""

    def __init__(
        self,
        receive: ByteReceiveStream,
        send: ByteSendStream,
        handlers: Mapping[str, Handler],
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        on_input_closed: Callable[[], None] = lambda: None,
        drain_seconds: float = 10.0,
    ) -> None:
        self._receive = receive
        self._send = send
        self._methods = {name: _adapt(h) for name, h in handlers.items()}
        self._max_line = max_line_bytes
        self._on_input_closed = on_input_closed
        self._drain_seconds = drain_seconds
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        out: tuple[MemoryObjectSendStream[bytes], MemoryObjectReceiveStream[bytes]]
        out = anyio.create_memory_object_stream[bytes](_OUTBOX)
        self._outbox, self._outbox_reader = out
        self._budget = _Budget(MAX_IN_FLIGHT, MAX_IN_FLIGHT_BYTES)
        self._closed = False

    async def serve(self) -> None:
        """Read and dispatch until the input ends, then drain in-flight requests (bounded)."""
        try:
            async with anyio.create_task_group() as writer_tg:
                writer_tg.start_soon(self._write_loop)
                async with anyio.create_task_group() as tg:
                    async for line in read_lines(self._receive, self._max_line):
                        await self._on_line(line, tg)
                    # Requests already read still get their answers: the owner stops long
                    # work (turns), answers we wait for will never come, and the rest get a
                    # bounded time to finish.
                    self._on_input_closed()
                    self._fail_pending()
                    tg.cancel_scope.deadline = anyio.current_time() + self._drain_seconds
                await self._outbox.aclose()
                # What is queued goes out, unless the peer stopped reading: then we leave.
                writer_tg.cancel_scope.deadline = anyio.current_time() + self._drain_seconds
        finally:
            self._fail_pending()

    def _fail_pending(self) -> None:
        self._closed = True
        for pending in self._pending.values():
            if not pending.done.is_set():
                pending.error = RpcError(INTERNAL_ERROR, "connection closed")
                pending.done.set()

    async def request(self, method: str, params: Any) -> Any:
        """Send a request to the peer and wait for its answer; raises RpcError on an error."""
        if self._closed:
            raise RpcError(INTERNAL_ERROR, "connection closed")
        msg_id = next(self._ids)
        pending = self._pending[msg_id] = _Pending()
        try:
            await self._post({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
            await pending.done.wait()
        finally:
            del self._pending[msg_id]
        if pending.error is not None:
            raise pending.error
        return pending.result

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification to the peer."""
        await self._post({"jsonrpc": "2.0", "method": method, "params": params})

    async def _post(self, message: Any) -> None:
        try:
            data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
        except UnicodeEncodeError:
            # A lone surrogate (legal in JSON text, not in UTF-8) echoed from the input:
            # \u escapes carry it as the peer sent it.
            data = json.dumps(message, separators=(",", ":")).encode()
        try:
            await self._outbox.send(data + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("dropped an outbound message: the connection is closed")

    async def _write_loop(self) -> None:
        # Coalescing a streaming burst into few writes: after each message we yield once, and
        # keep collecting while producers that are ready to run keep adding to the outbox.
        async with self._outbox_reader:
            async for first in self._outbox_reader:
                batch = [first]
                while len(batch) < _BATCH:
                    try:
                        batch.append(self._outbox_reader.receive_nowait())
                    except anyio.WouldBlock:
                        await anyio.lowlevel.checkpoint()
                        try:
                            batch.append(self._outbox_reader.receive_nowait())
                        except anyio.WouldBlock:
                            break
                try:
                    await self._send.send(b"".join(batch))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    log.info("output closed; discarding further messages")
                    return

    async def _on_line(self, line: bytes | OversizedLine, tg: TaskGroup) -> None:
        if isinstance(line, OversizedLine):
            await self._reply_error(
                None, INVALID_REQUEST, f"message of {line.size} bytes exceeds {self._max_line}"
            )
            return
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError as exc:  # includes invalid UTF-8
            await self._reply_error(None, PARSE_ERROR, f"Parse error: {exc}")
            return
        if _is_response(message):
            self._resolve(message)
            return
        await self._budget.acquire(len(line))
        tg.start_soon(self._dispatch, message, len(line))

    async def _dispatch(self, message: Any, size: int) -> None:
        try:
            response = await dispatch_to_serializable(
                "", self._methods, deserializer=lambda _: message
            )
            if response is not None:
                await self._post(response)
        except Exception:
            # One request must never take the connection (and the process) down with it.
            log.exception("failed to answer a request")
        finally:
            self._budget.release(size)

    def _resolve(self, message: dict[str, Any]) -> None:
        msg_id = message.get("id")
        pending = self._pending.get(msg_id) if isinstance(msg_id, int) else None
        if pending is None:
            log.warning("response to an unknown request id %r", msg_id)
            return
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            pending.error = RpcError(
                code if isinstance(code, int) else INTERNAL_ERROR,
                str(error.get("message", "")),
                error.get("data"),
            )
        else:
            pending.result = message.get("result")
        pending.done.set()

    async def _reply_error(self, msg_id: Any, code: int, message: str) -> None:
        await self._post(
            {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
        )


def _is_response(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and "method" not in message
        and ("result" in message or "error" in message)
    )


def _adapt(handler: Handler) -> Callable[..., Awaitable[Result]]:
    # jsonrpcserver binds params to the signature; **params takes any object and refuses arrays.
    async def method(**params: Any) -> Result:
        try:
            return Success(await handler(params))
        except RpcError as exc:
            return (
                Error(exc.code, exc.message, exc.data)
                if exc.data is not None
                else Error(exc.code, exc.message)
            )
        except Exception as exc:
            log.exception("handler failed")
            return Error(INTERNAL_ERROR, f"Internal error: {exc}")

    return method
