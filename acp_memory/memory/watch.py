"""Change notification for the search index: Linux inotify through ctypes, polled without blocking.

Events are queued by the kernel as part of the write itself, so a change made by any process
before a search starts is in the queue when that search drains it.

Not watchfiles, measured against this: its events reach Python through a thread of its own,
so under load a search right after an edit can miss it (7 of 50 edits on 2 busy cores) unless it
waits; and its wait has a 1 ms granularity, so every search would take a millisecond longer,
with a thread and three descriptors per root where this takes one descriptor and no thread.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import weakref
from dataclasses import dataclass, field

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ISDIR = 0x40000000
IN_ONLYDIR = 0x1000000

_MASK = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
    | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
)
_HEADER = struct.Struct("iIII")


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.inotify_init1  # noqa: B018 - absent outside Linux
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


@dataclass
class Changes:
    """What a drain found: note paths (relative to the root) to re-check, or a need to rescan."""

    files: set[str] = field(default_factory=set)
    rescan: bool = False


class Watcher:
    """inotify watches on every folder of one tree; `drain()` never blocks."""

    def __init__(self) -> None:
        if _LIBC is None:
            raise OSError("inotify is not available on this system")
        fd = _LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._fd: int | None = fd
        self._dirs: dict[int, str] = {}
        # A watcher dropped without close() still gives its descriptor back.
        self._release = weakref.finalize(self, os.close, fd)

    def add(self, folder: str, rel: str) -> None:
        """Watch one folder; `rel` is its path relative to the root ("" for the root)."""
        assert _LIBC is not None and self._fd is not None
        wd = _LIBC.inotify_add_watch(self._fd, os.fsencode(folder), _MASK)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"cannot watch {folder}")
        self._dirs[wd] = rel

    def fileno(self) -> int:
        """The inotify descriptor, readable once an event is queued (for a caller that waits
        for a change rather than polling)."""
        assert self._fd is not None
        return self._fd

    def drain(self) -> Changes:
        """Everything queued since the last drain."""
        changes = Changes()
        while self._fd is not None:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                break
            self._parse(data, changes)
        return changes

    def _parse(self, data: bytes, changes: Changes) -> None:
        pos = 0
        while pos + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, pos)
            raw = data[pos + _HEADER.size : pos + _HEADER.size + length].rstrip(b"\0")
            pos += _HEADER.size + length
            if mask & IN_Q_OVERFLOW:
                changes.rescan = True
            elif mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED):
                # A watched folder went away or moved: its watch no longer names a path.
                changes.rescan = changes.rescan or wd in self._dirs
            elif mask & IN_ISDIR:
                if mask & (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE):
                    changes.rescan = True
            elif wd in self._dirs:
                name = os.fsdecode(raw)
                folder = self._dirs[wd]
                changes.files.add(f"{folder}/{name}" if folder else name)

    def close(self) -> None:
        if self._fd is not None:
            self._release()
            self._fd = None
            self._dirs.clear()
