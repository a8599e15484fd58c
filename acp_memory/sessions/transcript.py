"""messages.json on disk: appended in O(message), and a whole JSON document at every instant.

Two files take turns. `messages.json` is what readers open; a spare beside it holds the same
transcript one or two messages behind. An append writes the messages the spare lacks over its
closing bracket, flushes it, then swaps the two names (link, rename, rename). A reader that
opens `messages.json`, or a writer killed at any point, only ever meets a complete file: the
swap is a rename, and bytes are written in place only into the file no name points readers at.

Each file is padded with trailing spaces (which JSON ignores) to a capacity, so an append never
changes a file's size: a reader that opened the old file just before a swap, and reads it in
several calls, cannot find a new end glued to the old one. A file that runs out of room is
written whole with a quarter more, which keeps appends O(message) amortised.

A reader that still holds a file open when that file becomes the spare and is appended to
may read up to two messages before the name shows them, so two reads in a row can go back by
a message or two. If that append lands while such a slow reader is still reading, the reader
gets a mix of old and new bytes, which never parses (the old closing bracket is either gone
or followed by more text); the name then holds a newer whole file, so a reader reads again
(`READ_ATTEMPTS`, as `load_bundle` does). What a reader that parses gets is always a whole
transcript holding the writer's first messages in order. Only a new file per append would
spare readers both, at O(transcript) per append.

The layout is `{"version":1,"messages":[` then one message per line, then `]}`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from acp_memory.atomic import write_atomic

MESSAGES_FILE = "messages.json"
_SPARE = ".messages.json.spare"
_SWAP = ".messages.json.swap"
_HEAD = b'{"version":1,"messages":['
_TAIL = b"\n]}\n"
_MIN_ROOM = 16 * 1024
# Reads of messages.json before one that does not parse is taken for a broken file: a torn
# read needs the reader to be outpaced by a whole append, twice in a row is already rare.
READ_ATTEMPTS = 4


# Rewrites a JSON value before it is written (a memory run's child: secret redaction).
Scrub = Callable[[Any], Any]


class Dumpable(Protocol):
    """A transcript message: anything that dumps to a JSON object."""

    def dump(self) -> dict[str, Any]: ...


def encode_message(message: Dumpable, scrub: Scrub | None = None) -> bytes:
    """One transcript entry as a single line of UTF-8 JSON (scrubbed first, if asked)."""
    data = message.dump() if scrub is None else scrub(message.dump())
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class _FileState:
    """What we know of one of the two files: inode, size, message count, closing offset."""

    ino: int
    size: int
    count: int
    end: int  # where the closing tail starts; new messages are written here


def _entries(lines: Sequence[bytes], first: int) -> bytes:
    return b"".join((b",\n" if first + i else b"\n") + line for i, line in enumerate(lines))


def _document(lines: Sequence[bytes]) -> tuple[bytes, int]:
    """The whole file of these encoded messages, padded, and where its closing tail starts."""
    body = _HEAD + _entries(lines, 0)
    room = max(_MIN_ROOM, len(body) // 4)
    return body + _TAIL + b" " * room, len(body)


class TranscriptFile:
    """The transcript of one bundle; not thread-safe (the session serialises its writes)."""

    def __init__(self, folder: Path, *, durable: bool = True, scrub: Scrub | None = None) -> None:
        self.path = folder / MESSAGES_FILE
        self.durable = durable  # False: no syncs (see atomic.py)
        self.scrub = scrub  # what each message goes through before it is written
        self._spare_path = folder / _SPARE
        self._swap_path = folder / _SWAP
        self._current: _FileState | None = None
        self._spare: _FileState | None = None
        # The last messages' encodings by position, kept until the spare has them too: each
        # message is encoded (and scrubbed) once, though it is written into both files.
        self._encoded: dict[int, tuple[Dumpable, bytes]] = {}

    def write_all(self, messages: Sequence[Dumpable]) -> None:
        """Replace the transcript whole (a new bundle, or a rewritten history)."""
        data, end = _document(self._lines(messages, 0))
        self._encoded = {}  # the next append writes a new spare whole
        write_atomic(self.path, data, durable=self.durable)
        self._current = _FileState(os.stat(self.path).st_ino, len(data), len(messages), end)
        self._spare = None

    def append(self, messages: Sequence[Dumpable]) -> None:
        """Make the file hold `messages`: those already written, then the new ones.

        Only the messages the spare lacks are encoded, so the cost is O(message).
        """
        spare = self._ready_spare(len(messages))
        if spare is not None:
            entries = _entries(self._lines(messages, spare.count), spare.count)
            if spare.end + len(entries) + len(_TAIL) <= spare.size:
                spare = self._write_spare(entries + _TAIL, spare, spare.end + len(entries))
            else:
                spare = None
        if spare is None:
            # After a load, when a file is full, or on anything unexpected: written whole.
            data, end = _document(self._lines(messages, 0))
            spare = self._write_spare(data, None, end)
        spare = _FileState(spare.ino, spare.size, len(messages), spare.end)
        kept_old = self._swap()
        self._current, self._spare = spare, (self._current if kept_old else None)
        # The next append writes into the spare from its count on: older ones are not needed.
        needed = self._spare.count if self._spare is not None else len(messages)
        self._encoded = {i: e for i, e in self._encoded.items() if i >= needed}

    def _lines(self, messages: Sequence[Dumpable], start: int) -> list[bytes]:
        """messages[start:] encoded, each from the cache when it holds that very message."""
        lines = []
        for index in range(start, len(messages)):
            message = messages[index]
            known = self._encoded.get(index)
            if known is not None and known[0] is message:
                line = known[1]
            else:
                line = encode_message(message, self.scrub)
                self._encoded[index] = (message, line)
            lines.append(line)
        return lines

    def _ready_spare(self, wanted: int) -> _FileState | None:
        # The spare is trusted only if it is still the very file we left there, unchanged.
        spare = self._spare
        if spare is None or spare.count >= wanted:
            return None
        try:
            st = os.stat(self._spare_path)
        except OSError:
            return None
        return spare if (st.st_ino, st.st_size) == (spare.ino, spare.size) else None

    def _write_spare(self, data: bytes, into: _FileState | None, end: int) -> _FileState:
        if into is None:
            # A new inode, never a truncated one: a reader may still hold the old file open.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._spare_path)
        flags = os.O_WRONLY | (0 if into else os.O_CREAT | os.O_EXCL)
        at = into.end if into else 0
        fd = os.open(self._spare_path, flags, 0o644)
        try:
            written = 0
            while written < len(data):
                written += os.pwrite(fd, data[written:], at + written)
            # Data first, then the rename: after a power cut the name never points at a hole.
            if self.durable:
                os.fdatasync(fd)
            st = os.fstat(fd)
            return _FileState(st.st_ino, st.st_size, 0, end)
        finally:
            os.close(fd)

    def _swap(self) -> bool:
        """Put the spare under the readers' name; True when the old file became the spare."""
        try:
            # The old file stays linked under the swap name, then becomes the next spare.
            self._link_swap()
        except OSError:
            # No old file, or a file system without hard links: the next append writes whole.
            os.replace(self._spare_path, self.path)
            return False
        os.replace(self._spare_path, self.path)
        os.replace(self._swap_path, self._spare_path)
        return True

    def _link_swap(self) -> None:
        try:
            os.link(self.path, self._swap_path)
        except FileExistsError:
            # Only a swap cut short (the process killed between the link and the renames)
            # leaves the name behind: a clean swap renames it away, so no unlink up front.
            os.unlink(self._swap_path)
            os.link(self.path, self._swap_path)
