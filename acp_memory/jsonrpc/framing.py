"""Newline-delimited framing over an anyio byte stream, with a bound on a line's size."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass

import anyio
from anyio import EndOfStream
from anyio.abc import ByteReceiveStream

log = logging.getLogger(__name__)

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class OversizedLine:
    """A line longer than the bound: its bytes were dropped as they arrived, never held."""

    size: int


async def read_lines(
    stream: ByteReceiveStream, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> AsyncGenerator[bytes | OversizedLine, None]:
    """Yield each complete line (without its newline) until the stream ends."""
    parts: list[bytes] = []
    held = 0
    dropping = 0  # bytes of an oversized line seen so far; 0 while collecting normally
    while True:
        try:
            chunk = await stream.receive(_CHUNK)
        except EndOfStream:
            break
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            piece = chunk[start:] if nl < 0 else chunk[start:nl]
            if dropping:
                dropping += len(piece)
            elif held + len(piece) > max_line_bytes:
                dropping = held + len(piece)
                parts, held = [], 0
            elif piece:
                parts.append(piece)
                held += len(piece)
            if nl < 0:
                break
            if dropping:
                yield OversizedLine(dropping)
                dropping = 0
            else:
                # Joining once per line keeps a 20 MB line linear in its size.
                yield b"".join(parts)
                parts, held = [], 0
            start = nl + 1
    if dropping:
        yield OversizedLine(dropping)
    elif held:
        yield b"".join(parts)


async def input_lines(
    receive: ByteReceiveStream, max_line_bytes: int, name: str
) -> AsyncGenerator[bytes | OversizedLine, None]:
    """`read_lines` until the input ends. A broken input (EIO, a reset socket) ends it exactly
    as its end does, nothing more will arrive on it, with one warning: `<name> failed
    (<reason>); treating it as closed`."""
    async with contextlib.aclosing(read_lines(receive, max_line_bytes)) as lines:
        while True:
            try:
                line = await anext(lines)
            except StopAsyncIteration:
                return
            except (anyio.BrokenResourceError, OSError) as exc:
                reason = exc.__cause__ or exc
                log.warning("%s failed (%s); treating it as closed", name,
                            str(reason) or type(reason).__name__)
                return
            yield line
