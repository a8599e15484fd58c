"""Outbound messages: encoded as lines, queued, and written in batches of few system calls."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import ByteSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

log = logging.getLogger(__name__)

_OUTBOX = 1024
_WRITE_BATCH = 256
_WRITE_BYTES = 1024 * 1024
_IDLE_TURNS = 3
# Made once: json.dumps with any option builds a new encoder per call.
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_ENCODE_ASCII = json.JSONEncoder(separators=(",", ":")).encode


class Outbox:
    """post() queues a message; run() writes what is queued until the outbox is closed."""

    def __init__(self, send: ByteSendStream) -> None:
        self._send = send
        out: tuple[MemoryObjectSendStream[bytes], MemoryObjectReceiveStream[bytes]]
        out = anyio.create_memory_object_stream[bytes](_OUTBOX)
        self._queue, self._reader = out

    async def post(self, message: Any) -> None:
        """Queue one message (a dict, or a batch's list); dropped once the outbox is closed."""
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
                self._queue.send_nowait(line)
            except anyio.WouldBlock:
                await self._queue.send(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("dropped an outbound message: the connection is closed")

    async def aclose(self) -> None:
        """No more messages: run() ends once what is queued is written."""
        await self._queue.aclose()

    async def run(self) -> None:
        """Write queued messages until the outbox is closed and empty, or the output closes."""
        # A streaming turn posts a message every loop iteration or two; writing each alone
        # would cost a system call (and a wakeup of the peer) per message. So a write waits
        # until the outbox has stayed empty for a few iterations, or the batch is full: a
        # lone answer waits only those few iterations, a burst goes out in few writes.
        reader = self._reader
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
