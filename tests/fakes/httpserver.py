"""The part both fake model servers share: a tiny HTTP/1.1 keep-alive server on anyio sockets,
the script queue and the log of received requests. Subclasses render replies in their dialect."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from types import TracebackType
from typing import Any, NamedTuple, Self

import anyio
from anyio.abc import Listener, SocketAttribute, SocketStream, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from .script import Reply, error

_GONE = (
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.IncompleteRead,
    anyio.DelimiterNotFound,
    ConnectionError,
)


@dataclass(frozen=True)
class Recorded:
    """One request as the server received it; header names are lower case."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any  # the parsed body, None when it is not JSON

    @property
    def messages(self) -> list[Any]:
        """The body's "messages" list (both dialects have one)."""
        return list((self.json or {}).get("messages") or [])


class Frame(NamedTuple):
    data: bytes
    piece: bool  # an output piece (counted by broken_after / stalled_after)


Scripted = Reply | Callable[[Recorded], Reply]


class FakeModelServer:
    """Serves scripted replies on 127.0.0.1:<free port> while inside `async with`."""

    path = "/"

    def __init__(
        self, *replies: Scripted, default: Reply | None = None, api_key: str | None = None
    ) -> None:
        self.requests: list[Recorded] = []
        self.default = default  # answers when the script is empty; else a 500 says so
        self.api_key = api_key  # when set, a request with another key gets a 401
        self.connections = 0  # TCP connections accepted (keep-alive reuse keeps it low)
        self.disconnects = 0  # responses the client walked away from
        self.client_gone = anyio.Event()  # set at the first of those
        self._queue: deque[Scripted] = deque(replies)
        self._arrived = anyio.Event()
        self._task_group: TaskGroup | None = None
        self._listener: Listener[SocketStream]
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The endpoint a provider posts to."""
        return f"http://127.0.0.1:{self.port}{self.path}"

    @property
    def unused(self) -> int:
        """Scripted replies not yet served."""
        return len(self._queue)

    async def wait_for_requests(self, count: int) -> None:
        """Return once `count` requests have arrived (bound it with anyio.fail_after)."""
        while len(self.requests) < count:
            await self._arrived.wait()

    def script(self, *replies: Scripted) -> None:
        """Queue replies; each request takes the next one (a callable gets the request)."""
        self._queue.extend(replies)

    async def __aenter__(self) -> Self:
        self._listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = self._listener.extra(SocketAttribute.local_port)
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._listener.serve, self._connection)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._task_group is not None
        self._task_group.cancel_scope.cancel()
        try:
            return await self._task_group.__aexit__(exc_type, exc, tb)
        finally:
            await self._listener.aclose()

    # Dialect hooks.
    def stream_frames(self, reply: Reply, request: Recorded) -> list[Frame]:
        raise NotImplementedError

    def json_answer(self, reply: Reply, request: Recorded) -> Any:
        raise NotImplementedError

    def error_body(self, reply: Reply) -> Any:
        raise NotImplementedError

    def presented_key(self, request: Recorded) -> str:
        raise NotImplementedError

    def _next(self, request: Recorded) -> Reply:
        if request.path.split("?")[0] != self.path:
            return error(404, f"fake server: no route {request.method} {request.path}")
        if self.api_key is not None and self.presented_key(request) != self.api_key:
            return error(401, "fake server: invalid API key")
        if self._queue:
            scripted = self._queue.popleft()
            return scripted(request) if callable(scripted) else scripted
        return self.default or error(500, "fake server: the script has no reply left")

    async def _connection(self, sock: SocketStream) -> None:
        self.connections += 1
        exchange = _Exchange(sock, self)
        async with sock:
            try:
                while (request := await exchange.read_request()) is not None:
                    self.requests.append(request)
                    self._arrived.set()
                    self._arrived = anyio.Event()
                    if not await self._respond(self._next(request), request, exchange):
                        return
            except _GONE:
                return

    async def _respond(self, reply: Reply, request: Recorded, io: _Exchange) -> bool:
        """Send one reply; False when the connection must close."""
        if reply.drop:
            return False
        if reply.stall_before_headers and not await io.stall(reply.release):
            return False
        if reply.endless is not None:
            await io.start_stream(reply.headers)
            while True:  # until the client hangs up: sending then fails
                await io.send_chunk(reply.endless)
                await anyio.sleep(reply.every)
        if reply.raw_body is not None:
            await io.send_raw(reply.status, reply.raw_body, reply.content_type, reply.headers)
            return True
        if reply.status >= 400:
            body = reply.body if reply.body is not None else self.error_body(reply)
            await io.send_json(reply.status, body, reply.headers)
            return True
        if not (request.json or {}).get("stream"):
            await io.send_json(200, self.json_answer(reply, request), reply.headers)
            return True
        await io.start_stream(reply.headers)
        pieces, stalled = 0, reply.stall_before_headers
        frames = (
            self.stream_frames(reply, request)
            if reply.events is None
            else [Frame(sse(data, name), True) for name, data in reply.events]
        )
        for frame in frames:
            if reply.stall_after == pieces and not stalled:
                stalled = True
                if not await io.stall(reply.release):
                    return False
            if reply.break_after == pieces:
                return False  # close mid-body: no final chunk
            await io.send_chunk(frame.data)
            pieces += frame.piece
        await io.end_stream()
        return True

    def _client_left(self) -> None:
        self.disconnects += 1
        self.client_gone.set()


class _Exchange:
    """HTTP/1.1 on one socket: read requests, write JSON or chunked SSE answers."""

    def __init__(self, sock: SocketStream, server: FakeModelServer) -> None:
        self.sock = sock
        self.reader = BufferedByteReceiveStream(sock)
        self.server = server

    async def read_request(self) -> Recorded | None:
        try:
            head = await self.reader.receive_until(b"\r\n\r\n", 1 << 16)
        except (anyio.IncompleteRead, anyio.EndOfStream):
            return None  # the client closed an idle keep-alive connection
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length") or 0)
        body = await self.reader.receive_exactly(length) if length else b""
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        return Recorded(method, path, headers, body, parsed)

    async def send_json(self, status: int, body: Any, headers: dict[str, str]) -> None:
        await self.send_raw(status, json.dumps(body).encode(), "application/json", headers)

    async def send_raw(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str]
    ) -> None:
        head = {"Content-Type": content_type, "Content-Length": str(len(data)), **headers}
        await self._send(self._head(status, head) + data)

    async def start_stream(self, headers: dict[str, str]) -> None:
        head = {
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "Transfer-Encoding": "chunked",
            **headers,
        }
        await self._send(self._head(200, head))

    async def send_chunk(self, data: bytes) -> None:
        await self._send(b"%x\r\n%s\r\n" % (len(data), data))

    async def end_stream(self) -> None:
        await self._send(b"0\r\n\r\n")

    async def stall(self, release: anyio.Event | None) -> bool:
        """Wait for release; False (and the server told) if the client left first."""
        gone = False
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                nonlocal gone
                try:
                    while True:
                        await self.reader.receive()
                except _GONE:
                    gone = True
                tg.cancel_scope.cancel()

            async def wait(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            if release is not None:
                tg.start_soon(wait, release)
        if gone:
            self.server._client_left()
        return not gone

    async def _send(self, data: bytes) -> None:
        try:
            await self.sock.send(data)
        except _GONE:
            self.server._client_left()
            raise

    @staticmethod
    def _head(status: int, headers: dict[str, str]) -> bytes:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Overloaded" if status == 529 else "Error"
        lines = [f"HTTP/1.1 {status} {phrase}", *(f"{k}: {v}" for k, v in headers.items())]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; data that is not a str goes out as JSON."""
    payload = data if isinstance(data, str) else json.dumps(data)
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {payload}\n\n".encode()
