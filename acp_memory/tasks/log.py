"""A task's output log, bounded, written off the event loop; and how a model reads output.

Output is stored as it came (escape sequences, carriage returns and all): a human may `cat`
the log in a terminal. Cleaning for the model happens when it is read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Protocol

import anyio

# Past the limit a log keeps its head and its last quarter (at most this much): a build's
# first lines say what ran, its last ones why it failed.
MAX_TAIL_BYTES = 64 * 1024
# Enough raw bytes to fill a model's view even after escape sequences are dropped.
MIN_READ_BYTES = 64 * 1024


class TextFilter(Protocol):
    """Rewrites a log's text before it is kept (a memory run's secret redaction)."""

    def feed(self, text: str) -> str:
        """Text as it streams in; returns what may be written now, which ends at a line's end
        (the log hands it a line's pieces together, the same text)."""
        ...

    def flush(self) -> str:
        """The log ends: the rest."""
        ...

    def text(self, whole: str) -> str:
        """A text that came whole, rewritten before a writer cuts it for a line."""
        ...


class TaskLog:
    """Output of one task, at most `limit` bytes kept (plus a marker where bytes were cut).

    It lives in memory until `attach` gives it a file (a foreground command that may never
    become a task writes nothing to disk); appends then go to `output.log` in worker threads,
    coalesced, so a chatty command costs few thread hops and never blocks the event loop.
    With `inline` (a memory run's log: a few short lines, never synced) the appends are made
    on the event loop instead, through one descriptor held until the log closes: one small
    write costs less than the trip.
    """

    def __init__(
        self, limit: int, text_filter: TextFilter | None = None, *, inline: bool = False
    ) -> None:
        self.limit = max(limit, 1)
        self.filter = text_filter  # every byte written goes through it, as text
        self.inline = inline
        self._fd: int | None = None  # an inline log's, open from its first append to close
        self.total = 0  # every byte the task wrote: the record's output_bytes
        self._tail_cap = min(MAX_TAIL_BYTES, self.limit // 4)
        self._head_cap = self.limit - self._tail_cap
        self._head_len = 0  # bytes of the head, stored or pending
        self._memory = bytearray()  # the head, while there is no file
        self._pending = bytearray()  # head bytes on their way to the file
        self._tail = bytearray()  # the last bytes past the head
        self._over = 0  # bytes past the head
        self._client_cut = False  # the client's terminal cut output before we saw it
        self._path: Path | None = None
        self._lock = anyio.Lock()
        self._sealed = False  # the marker and tail are in the file: it is complete
        # A filtered log's text since its last line end: its filter would hold it anyway, so
        # a model's chunks are fed a line at a time rather than one by one.
        self._unfed: list[str] = []

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def truncated(self) -> bool:
        """Whether bytes are missing from the log (the record's output_truncated)."""
        return self._client_cut or self._over > len(self._tail)

    def mark_truncated(self) -> None:
        """Output was cut before it reached us (a client terminal's byte limit)."""
        self._client_cut = True

    def clean(self, text: str) -> str:
        """text as this log would keep it: a writer that cuts text for a line cleans it
        first, so that its filter sees what it must rewrite whole."""
        return self.filter.text(text) if self.filter is not None else text

    async def write(self, data: bytes | str) -> None:
        """Append output. Bytes past the limit keep only the log's tail."""
        if self.filter is not None and not self._sealed:
            text = data if isinstance(data, str) else data.decode("utf-8", errors="replace")
            if "\n" not in text:
                self._unfed.append(text)
                return
            data = self.filter.feed(self._take_unfed() + text)
        await self._store(data)

    def _take_unfed(self) -> str:
        text, self._unfed = "".join(self._unfed), []
        return text

    async def _store(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8", errors="replace")
        if not data or self._sealed:
            return
        self.total += len(data)
        room = max(self._head_cap - self._head_len, 0)
        head, rest = data[:room], data[room:]
        if head:
            self._head_len += len(head)
            if self._path is None:
                self._memory += head
            else:
                self._pending += head
        if rest:
            self._over += len(rest)
            self._tail += rest
            del self._tail[: -self._tail_cap or len(self._tail)]
        if self._pending:
            await self._flush()

    async def attach(self, path: Path) -> None:
        """Keep the log in `path` from now on, starting with what it holds in memory."""
        async with self._lock:
            data, self._memory = bytes(self._memory), bytearray()
            await self._io(_write_new, path, data)
            # Output that came while the file was being made is still in memory.
            while self._memory:
                data, self._memory = bytes(self._memory), bytearray()
                await self._io(_append, path, data)
            self._path = path

    def opening(self) -> tuple[bytes, Callable[[Path], None]]:
        """What the log holds in memory, and the blocking work that makes its file with it,
        for a caller that makes the file in a worker-thread trip of its own; `attached`
        then takes the file."""
        data = bytes(self._memory)
        return data, partial(_write_new, data=data)

    def attached(self, path: Path, written: int) -> None:
        """The log's file was made at path with its first `written` bytes (see `opening`);
        output that came since goes to the file with the next write."""
        self._pending[:0] = self._memory[written:]
        self._memory = bytearray()
        self._path = path

    async def close(self) -> None:
        """Flush, then end the log with the marker and the tail if bytes were cut."""
        if self._sealed:
            return
        try:
            if self.filter is not None:
                await self._store(self.filter.feed(self._take_unfed()) + self.filter.flush())
            await self._flush()
            ending = self._ending()
            async with self._lock:
                self._sealed = True
                if self._path is None:
                    self._memory += ending
                    self._tail.clear()
                elif ending:
                    await self._io(_append, self._path, ending)
                    self._tail.clear()
        finally:
            if self._fd is not None:  # an inline log's: nothing more is appended
                os.close(self._fd)
                self._fd = None

    async def read_tail(self, max_bytes: int) -> bytes:
        """The last `max_bytes` of the log as a reader sees it (head, marker, tail)."""
        ending = b"" if self._sealed else bytes(self._ending())
        want = max_bytes - len(ending)
        if want <= 0:
            return ending[-max_bytes:]
        if self._path is None:
            head = bytes(self._memory[-want:])
        else:
            pending = bytes(self._pending)
            head = await anyio.to_thread.run_sync(read_file_tail, self._path, want)
            head = (head + pending)[-want:]
        return head + ending

    async def _flush(self) -> None:
        # Whoever holds the lock writes everything pending, so writers queued behind it find
        # their bytes already written and return at once.
        async with self._lock:
            if not self._pending or self._path is None:
                return
            chunk, self._pending = bytes(self._pending), bytearray()
            await self._io(_append, self._path, chunk)

    async def _io(self, write: Callable[[Path, bytes], None], path: Path, data: bytes) -> None:
        if self.inline and write is _append:
            if self._fd is None:
                self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        elif self.inline:
            write(path, data)
        else:
            await anyio.to_thread.run_sync(write, path, data)

    def _ending(self) -> bytes:
        cut = self._over - len(self._tail)
        if cut <= 0:
            return bytes(self._tail)
        marker = f"\n[output truncated: {cut} bytes cut here; the last {len(self._tail)} follow]\n"
        return marker.encode() + bytes(self._tail)


def _write_new(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Exclusive: a log already there is another task's, and is never truncated.
    with open(path, "xb") as f:
        f.write(data)


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def read_budget(chars: int) -> int:
    """Raw log bytes to read for a view of `chars` characters: escape sequences and redraws
    the view drops take room too."""
    return max(MIN_READ_BYTES, chars * 8)


def read_file_tail(path: Path, max_bytes: int) -> bytes:
    """The last max_bytes of a file, b"" when it is missing (blocking)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - max_bytes))
            return f.read(max_bytes)
    except FileNotFoundError:
        return b""


# CSI (colours, cursor moves), OSC (titles, hyperlinks) ended by BEL or ST, the string
# commands DCS/SOS/PM/APC, and the remaining two-byte escapes.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -/]*[0-~]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)


def clean_output(text: str) -> str:
    """Output as a terminal would have shown it: escape sequences dropped, and each line as
    it stood after its carriage-return redraws (progress bars keep their last frame)."""
    text = _ESCAPES.sub("", text).replace("\r\n", "\n")
    if "\r" not in text:
        return text
    return "\n".join(_redraw(line) if "\r" in line else line for line in text.split("\n"))


def _redraw(line: str) -> str:
    # Each carriage return moves back to the start of the line; what follows overwrites.
    shown = ""
    for part in line.split("\r"):
        shown = part + shown[len(part) :]
    return shown


def clip(text: str, limit: int, *, keep_head: float = 0.2) -> str:
    """text within `limit` characters: its head and tail around a marker saying how much
    was cut (most of the room goes to the tail, where errors are)."""
    if len(text) <= limit:
        return text
    marker_room = 64
    room = max(limit - marker_room, 0)
    head = int(room * keep_head)
    tail = room - head
    cut = len(text) - head - tail
    marker = f"\n[output truncated: {cut} characters cut]\n"
    return text[:head] + marker + (text[-tail:] if tail else "")


def last_lines(text: str, count: int, limit: int) -> str:
    """The last `count` lines of text within `limit` characters, a marker where cut."""
    lines = text.splitlines()
    dropped = max(len(lines) - count, 0)
    kept = "\n".join(lines[dropped:])
    out = f"[{dropped} earlier lines not shown]\n{kept}" if dropped else kept
    if len(out) <= limit:
        return out
    room = max(limit - 64, 0)
    return f"[output truncated: {len(out) - room} earlier characters cut]\n" + out[-room:]


def tail_view(raw: bytes, budget: int, count: int, limit: int) -> str:
    """The last `count` lines of raw output as a model reads them (clean_output, last_lines);
    raw of a whole budget was read from the middle of a log, so its first line is dropped."""
    text = raw.decode("utf-8", errors="replace")
    if len(raw) >= budget:  # started mid-line
        text = text.partition("\n")[2]
    return last_lines(clean_output(text), count, limit)
