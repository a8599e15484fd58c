"""A JSON-RPC 2.0 peer over newline-delimited byte streams.

Inbound requests run concurrently, each in its own task, so a long request never blocks a
notification, another request, or the answer to a request we sent. Method lookup, params
binding and handler errors are jsonrpcserver's; framing, validation, ids, batches, admission
and correlation are ours.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
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

# What inbound handlers may hold at once, in requests and in bytes of their lines.
MAX_IN_FLIGHT = 512
MAX_IN_FLIGHT_BYTES = 128 * 1024 * 1024
# Requests read while the handlers' budget is full wait here, so that the reader goes on
# reading: the answer to a request we sent may be right behind them, and the handlers that
# hold the budget may be waiting for exactly that answer. Once this backlog is full too, the
# reader stops (and the peer with it), which bounds memory under a burst.
MAX_WAITING = 4096
MAX_WAITING_BYTES = 64 * 1024 * 1024
# Members of one batch; each takes its own place in the backlog and the budget.
MAX_BATCH = 256
_OUTBOX = 1024
_WRITE_BATCH = 256
_WRITE_BYTES = 1024 * 1024
_IDLE_TURNS = 3
_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
# Made once: json.dumps with any option builds a new encoder per call.
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_ENCODE_ASCII = json.JSONEncoder(separators=(",", ":")).encode
# Work the request being handled asked to run once its answer is queued (after_reply).
_AFTER_REPLY: ContextVar[list[Callable[[], Awaitable[None]]] | None] = ContextVar(
    "_AFTER_REPLY", default=None
)


def after_reply(work: Callable[[], Awaitable[None]]) -> None:
    """Run `work` once the answer to the request being handled is queued: a notification
    the peer can only place once it has that answer (a handler's own messages go out before
    it). Outside a request handler, RuntimeError."""
    pending = _AFTER_REPLY.get()
    if pending is None:
        raise RuntimeError("after_reply() outside a request handler")
    pending.append(work)


class _Pending:
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: RpcError | None = None


class _Budget:
    """Admits work while both the count and the bytes it holds stay under their bounds."""

    def __init__(self, count: int, nbytes: int) -> None:
        self._max_count, self._max_bytes = count, nbytes
        self._count = self._bytes = 0
        self._freed = anyio.Event()

    def try_acquire(self, size: int, count: int = 1) -> bool:
        # Work larger than the bounds is still admitted when nothing else is held, or it
        # could never run at all.
        if self._count and (
            self._count + count > self._max_count or self._bytes + size > self._max_bytes
        ):
            return False
        self._count += count
        self._bytes += size
        return True

    async def acquire(self, size: int, count: int = 1) -> None:
        while not self.try_acquire(size, count):
            await self._freed.wait()

    def release(self, size: int, count: int = 1) -> None:
        self._count -= count
        self._bytes -= size
        self._freed.set()
        self._freed = anyio.Event()


class _Batch:
    """The answers of one batch, sent together once its last request is done."""

    __slots__ = ("after", "answers", "remaining")

    def __init__(self, size: int) -> None:
        self.answers: list[Any] = [None] * size
        self.remaining = 0
        # Its members' after_reply work: it waits for the batch's one answer.
        self.after: list[Callable[[], Awaitable[None]]] = []


class _Waiting:
    __slots__ = ("batch", "index", "message", "size")

    def __init__(
        self, message: dict[str, Any], size: int, batch: _Batch | None = None, index: int = 0
    ) -> None:
        self.message, self.size, self.batch, self.index = message, size, batch, index


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
        max_in_flight: int = MAX_IN_FLIGHT,
        max_in_flight_bytes: int = MAX_IN_FLIGHT_BYTES,
        max_waiting: int = MAX_WAITING,
        max_waiting_bytes: int = MAX_WAITING_BYTES,
        max_batch: int = MAX_BATCH,
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
        self._budget = _Budget(max_in_flight, max_in_flight_bytes)
        self._backlog = _Budget(max_waiting, max_waiting_bytes)
        self._waiting: deque[_Waiting] = deque()
        self._max_batch = max_batch
        self._handlers: TaskGroup | None = None
        self._closed = False

    async def serve(self) -> None:
        """Read and dispatch until the input ends, then drain in-flight requests (bounded)."""
        try:
            async with anyio.create_task_group() as writer_tg:
                writer_tg.start_soon(self._write_loop)
                async with anyio.create_task_group() as tg:
                    self._handlers = tg
                    await self._read()
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

    async def _read(self) -> None:
        async with contextlib.aclosing(read_lines(self._receive, self._max_line)) as lines:
            while True:
                try:
                    line = await anext(lines)
                except StopAsyncIteration:
                    return
                except (anyio.BrokenResourceError, OSError) as exc:
                    # A broken input (EIO, a reset socket) ends the conversation exactly as
                    # its end does; nothing more will arrive on it.
                    reason = exc.__cause__ or exc
                    log.warning("input failed (%s); treating it as closed", _describe(reason))
                    return
                await self._on_line(line)

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
            line = _ENCODE(message).encode() + b"\n"
        except UnicodeEncodeError:
            # A lone surrogate (legal in JSON text, not in UTF-8) echoed from the input:
            # \u escapes carry it as the peer sent it.
            line = _ENCODE_ASCII(message).encode() + b"\n"
        try:
            # Queueing is synchronous while the outbox has room, as a transport's write is: a
            # full yield per message would cost a streaming turn a loop iteration per chunk.
            await anyio.lowlevel.checkpoint_if_cancelled()
            try:
                self._outbox.send_nowait(line)
            except anyio.WouldBlock:
                await self._outbox.send(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("dropped an outbound message: the connection is closed")

    async def _write_loop(self) -> None:
        # A streaming turn posts a message every loop iteration or two; writing each alone
        # would cost a system call (and a wakeup of the peer) per message. So a write waits
        # until the outbox has stayed empty for a few iterations, or the batch is full: a
        # lone answer waits only those few iterations, a burst goes out in few writes.
        reader = self._outbox_reader
        async with reader:
            async for first in reader:
                batch = [first]
                size, idle = len(first), 0
                while idle < _IDLE_TURNS and len(batch) < _WRITE_BATCH and size < _WRITE_BYTES:
                    try:
                        item = reader.receive_nowait()
                    except anyio.WouldBlock:
                        idle += 1
                        await anyio.lowlevel.checkpoint()
                        continue
                    except anyio.EndOfStream:
                        break
                    batch.append(item)
                    size += len(item)
                    idle = 0
                try:
                    await self._send.send(b"".join(batch))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    log.info("output closed; discarding further messages")
                    return

    async def _on_line(self, line: bytes | OversizedLine) -> None:
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
        if isinstance(message, list):
            await self._on_batch(message, len(line))
        elif _is_response(message):
            self._resolve(message)
        elif (problem := _invalid(message)) is not None:
            await self._reply_error(_readable_id(message), INVALID_REQUEST, problem)
        else:
            await self._enqueue([_Waiting(message, len(line))], len(line))

    async def _on_batch(self, members: list[Any], size: int) -> None:
        if not members:
            await self._reply_error(None, INVALID_REQUEST, "Invalid request: empty batch")
            return
        # Answers to our own requests cost no budget, so they are taken from any batch.
        others: list[tuple[int, Any]] = []
        for index, member in enumerate(members):
            if _is_response(member):
                self._resolve(member)
            else:
                others.append((index, member))
        if len(others) > self._max_batch:
            await self._reply_error(
                None, INVALID_REQUEST, f"batch of {len(others)} requests exceeds {self._max_batch}"
            )
            return
        batch = _Batch(len(members))
        requests: list[tuple[int, dict[str, Any]]] = []
        for index, member in others:
            if (problem := _invalid(member)) is not None:
                batch.answers[index] = _error(_readable_id(member), INVALID_REQUEST, problem)
            else:
                requests.append((index, member))
        if not requests:
            await self._post_batch(batch)
            return
        # The line's bytes are shared among its requests, so the budget holds them all.
        share, extra = divmod(size, len(requests))
        waiting = [
            _Waiting(member, share + (n < extra), batch, index)
            for n, (index, member) in enumerate(requests)
        ]
        batch.remaining = len(waiting)
        await self._enqueue(waiting, size)

    async def _enqueue(self, items: list[_Waiting], size: int) -> None:
        await self._backlog.acquire(size, len(items))
        self._waiting.extend(items)
        self._admit()

    def _admit(self) -> None:
        tg = self._handlers
        if tg is None or tg.cancel_scope.cancel_called:
            return
        while self._waiting and self._budget.try_acquire(self._waiting[0].size):
            item = self._waiting.popleft()
            self._backlog.release(item.size)
            tg.start_soon(self._dispatch, item)

    async def _dispatch(self, item: _Waiting) -> None:
        message = item.message
        response: Any = None
        after: list[Callable[[], Awaitable[None]]] = []
        _AFTER_REPLY.set(after)  # this task's own context; the handler's task copies it
        try:
            try:
                # One request at a time: jsonrpcserver gathers a batch without bound, so
                # batches are split above and only single requests reach it.
                response = await dispatch_to_serializable(
                    "", self._methods, deserializer=lambda _: message, validator=_checked_already
                )
            except Exception:
                # One request must never take the connection (and the process) down with it.
                log.exception("failed to answer a request")
                if "id" in message:
                    response = _error(message["id"], INTERNAL_ERROR, "Internal error")
            if item.batch is None:
                if response is not None:
                    await self._post(response)
            else:
                batch = item.batch
                batch.answers[item.index] = response
                batch.after += after
                batch.remaining -= 1
                if batch.remaining:
                    after = []  # the last member to finish runs the batch's work
                else:
                    await self._post_batch(batch)
                    after = batch.after
            for work in after:
                try:
                    await work()
                except Exception:
                    log.exception("failed to finish a request after its answer")
        finally:
            self._budget.release(item.size)
            self._admit()

    async def _post_batch(self, batch: _Batch) -> None:
        answers = [a for a in batch.answers if a is not None]
        if answers:  # a batch of notifications and responses gets no answer at all
            await self._post(answers)

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
        await self._post(_error(msg_id, code, message))


def _error(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def _is_response(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and "method" not in message
        and ("result" in message or "error" in message)
    )


def _valid_id(value: Any) -> bool:
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):  # a bool is an int to Python, not a number to JSON
        return False
    if isinstance(value, int):
        return True
    # NaN and Infinity parse, but have no JSON spelling to echo them back in.
    return isinstance(value, float) and math.isfinite(value)


def _readable_id(message: Any) -> Any:
    """The id to answer an invalid request with: its own when it is a valid id, else null."""
    if isinstance(message, dict):
        msg_id = message.get("id")
        if _valid_id(msg_id):
            return msg_id
    return None


def _invalid(message: Any) -> str | None:
    """Why a message is not a valid request object, or None when it is one.

    The same rules as jsonrpcserver's schema, checked here because its refusal answers with
    a null id even when the request's own id is readable, and a client correlating by id
    would then wait forever.
    """
    if not isinstance(message, dict):
        return "Invalid request: not a request object"
    if message.get("jsonrpc") != "2.0":
        return 'Invalid request: "jsonrpc" must be "2.0"'
    if not isinstance(message.get("method"), str):
        return 'Invalid request: "method" must be a string'
    if "id" in message and not _valid_id(message["id"]):
        return 'Invalid request: "id" must be a string, a number or null'
    if "params" in message and not isinstance(message["params"], dict | list):
        return 'Invalid request: "params" must be an object or an array'
    unknown = message.keys() - _REQUEST_KEYS
    if unknown:
        return f"Invalid request: unexpected member {sorted(unknown)[0]!r}"
    return None


def _checked_already(message: Any) -> None:
    """jsonrpcserver's validator: _invalid has already refused what its schema would."""


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


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
