"""A Connection's two byte streams in memory, with the test as the peer on the other end.

The input is unbuffered: sending to the connection completes only once its reader has taken
the bytes, so a test can tell whether the reader is still reading.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream


class _Input(ByteReceiveStream):
    def __init__(self, source: MemoryObjectReceiveStream[bytes | BaseException]) -> None:
        self._source = source
        self._rest = b""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._rest:
            item = await self._source.receive()  # EndOfStream once the peer ends its output
            if isinstance(item, BaseException):
                raise item
            self._rest = item
        data, self._rest = self._rest[:max_bytes], self._rest[max_bytes:]
        return data

    async def aclose(self) -> None:
        await self._source.aclose()


class _Output(ByteSendStream):
    def __init__(self, sink: MemoryObjectSendStream[bytes]) -> None:
        self._sink = sink
        self.writes = 0

    async def send(self, item: bytes) -> None:
        self.writes += 1
        await self._sink.send(item)

    async def aclose(self) -> None:
        await self._sink.aclose()


class Peer:
    """The far end: writes to the connection's input and reads the lines it writes."""

    def __init__(self) -> None:
        to_conn: tuple[
            MemoryObjectSendStream[bytes | BaseException],
            MemoryObjectReceiveStream[bytes | BaseException],
        ] = anyio.create_memory_object_stream[bytes | BaseException](0)
        from_conn: tuple[MemoryObjectSendStream[bytes], MemoryObjectReceiveStream[bytes]]
        from_conn = anyio.create_memory_object_stream[bytes](1024)
        self._writer, reader = to_conn
        sink, self._output = from_conn
        self.receive_stream: ByteReceiveStream = _Input(reader)
        self._output_stream = _Output(sink)
        self.send_stream: ByteSendStream = self._output_stream
        self._lines: list[bytes] = []
        self._partial = b""

    @property
    def writes(self) -> int:
        """How many writes the connection made to its output."""
        return self._output_stream.writes

    async def send(self, data: bytes) -> None:
        await self._writer.send(data)

    async def send_json(self, *messages: Any) -> None:
        """Each message on its own line, all in one chunk."""
        await self.send(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def fail(self, exc: BaseException) -> None:
        """The connection's next read raises exc."""
        await self._writer.send(exc)

    async def end(self) -> None:
        await self._writer.aclose()

    async def recv_line(self) -> bytes:
        while not self._lines:
            chunk = await self._output.receive()
            *complete, self._partial = (self._partial + chunk).split(b"\n")
            self._lines.extend(complete)
        return self._lines.pop(0)

    async def recv(self) -> Any:
        return json.loads(await self.recv_line(), parse_constant=_not_json)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
