"""Each session's updates, fanned out to the clients reading its events stream.

A publisher never waits: a client that falls a whole buffer behind is dropped (its stream
ends; what it missed is in the transcript and the task records), so a stalled reader cannot
hold up a turn or another reader.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

log = logging.getLogger(__name__)

BUFFER = 1024  # updates a reader may lag behind
PING_SECONDS = 15.0  # a comment line on an idle stream keeps proxies from closing it

Update = dict[str, Any]


class EventHub:
    """Readers of each session's updates."""

    def __init__(self, buffer: int = BUFFER) -> None:
        self.buffer = buffer
        self._readers: dict[str, set[MemoryObjectSendStream[Update]]] = {}
        self.closed = False

    def subscribe(self, session_id: str) -> MemoryObjectReceiveStream[Update]:
        """A stream of the session's updates from now on; it ends when the session is deleted
        or the server stops. Close it to unsubscribe."""
        send, receive = anyio.create_memory_object_stream[Update](self.buffer)
        if self.closed:
            send.close()
        else:
            self._readers.setdefault(session_id, set()).add(send)
        return receive

    def publish(self, session_id: str, update: Update) -> None:
        """Hand the update to every reader of the session, without waiting for any."""
        readers = self._readers.get(session_id)
        for send in list(readers or ()):
            try:
                send.send_nowait(update)
            except anyio.WouldBlock:
                log.warning("dropping an events reader of %s: %d updates behind",
                            session_id, self.buffer)
                self._drop(session_id, send)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._drop(session_id, send)  # the reader went away

    def watched(self, session_id: str) -> bool:
        """Whether a client reads the session's stream now (its session is in use); readers
        that went away are dropped here, as a publish would."""
        for send in list(self._readers.get(session_id, ())):
            if send.statistics().open_receive_streams == 0:
                self._drop(session_id, send)
        return session_id in self._readers

    def end(self, session_id: str) -> None:
        """End the session's streams (it was deleted)."""
        for send in self._readers.pop(session_id, set()):
            send.close()

    def close(self) -> None:
        """End every stream and take no new readers (the server is stopping)."""
        self.closed = True
        for session_id in list(self._readers):
            self.end(session_id)

    def _drop(self, session_id: str, send: MemoryObjectSendStream[Update]) -> None:
        send.close()
        readers = self._readers.get(session_id)
        if readers is not None:
            readers.discard(send)
            if not readers:
                del self._readers[session_id]


async def sse_frames(updates: MemoryObjectReceiveStream[Update]) -> AsyncIterator[bytes]:
    """Server-sent events: one per update, named after its sessionUpdate, the update as data."""
    async with updates:
        while True:
            update: Update | None = None
            # The wait is scoped, never the yield: a cancel scope must not span a yield.
            with anyio.move_on_after(PING_SECONDS):
                try:
                    update = await updates.receive()
                except anyio.EndOfStream:
                    return
            if update is None:
                yield b": ping\n\n"
            else:
                yield sse_event(str(update.get("sessionUpdate", "message")), update)


def sse_event(name: str, data: Any) -> bytes:
    """One event; JSON holds no raw newline, so its data is a single `data:` line."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
