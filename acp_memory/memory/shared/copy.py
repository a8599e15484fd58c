"""A process's local copy of a shared project's notes: real files under
`<cache>/shared/<sha256 of key>/notes/`, which the store, the index and the scan use as they use
any disk root, kept what the server's `notes` table holds by the history's `seq`.

A catch-up reads the changes after the last `seq` the copy applied, then the rows of the paths
they touched as they are NOW (a folder's with everything under it), and makes those paths so:
the history says where to look, the notes table what to find there. A first sync copies every
row. Whatever the server says, a path is checked like any other before it becomes a file, and a
tampered row is skipped with a warning, never written outside the copy.

`state.json` beside the notes (key, seq, synced_at) is a cache file: lost, the next catch-up is
a first sync.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from acp_memory.atomic import write_atomic, write_json_atomic
from acp_memory.memory.history.journal import like_prefix
from acp_memory.memory.history.states import remove
from acp_memory.memory.rootlock import root_lock
from acp_memory.memory.roots import (
    Location,
    MemoryPathError,
    check_relative,
    ensure_inside,
    is_note_name,
    shared_copy_folder,
)
from acp_memory.memory.shared.schema import SCHEMA
from acp_memory.timestamps import now_iso

log = logging.getLogger(__name__)

Parts = tuple[str, ...]
# What the server holds at a path: a note's text, or None for a folder.
Rows = dict[Parts, str | None]


@dataclass(frozen=True)
class _Marker:
    seq: int
    synced_at: str


class LocalCopy:
    """One key's local copy (see the module's docstring)."""

    def __init__(self, cache_dir: Path, key: str, lock_timeout: float = 10.0) -> None:
        self.key = key
        self.folder = shared_copy_folder(cache_dir, key)
        self.root = self.folder / "notes"
        self.lock_timeout = lock_timeout  # seconds a catch-up waits for a writer's root lock

    @property
    def _marker_file(self) -> Path:
        return self.folder / "state.json"

    def seq(self) -> int:
        """The last seq applied (0: never synced)."""
        marker = self._marker()
        return marker.seq if marker else 0

    def synced_at(self) -> str | None:
        """The ISO time of the last successful catch-up, or None (never synced)."""
        marker = self._marker()
        return marker.synced_at if marker else None

    def catch_up(self, conn: psycopg.Connection[Any], *, locked: bool = False) -> int:
        """Apply every change of the key after seq() (a first sync: every row), on the
        caller's connection; takes the root's lock unless `locked` (the caller holds it).
        How many paths changed. psycopg errors propagate."""
        if locked:
            return self._catch_up(conn)
        with root_lock(self.root, "project", self.lock_timeout):
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                return self._catch_up(conn)  # the caller's transaction: read within it
            # One snapshot for the changes and the rows: a change committed between the two
            # reads is neither half applied nor skipped.
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                return self._catch_up(conn)

    def applied(self, seq: int) -> None:
        """The caller (a recording, holding the project's advisory lock and the root's lock)
        wrote its own change `seq` into the copy: the marker moves to it."""
        marker = self._marker()
        if marker is None:
            return  # never synced: the next catch-up copies everything anyway
        self._write_marker(max(marker.seq, seq))

    def _catch_up(self, conn: psycopg.Connection[Any]) -> int:
        marker = self._marker()
        first, last = conn.execute(
            f"SELECT min(seq), max(seq) FROM {SCHEMA}.history WHERE project = %s", (self.key,)
        ).fetchone() or (None, None)
        last = last or 0
        if marker is not None and last <= marker.seq:
            self._write_marker(marker.seq)
            return 0
        # Never synced, or the history after our seq was pruned (its first record is past
        # it): the changes cannot say what moved, so the copy is made what the server holds.
        whole = marker is None or (first is not None and first > marker.seq + 1)
        touched: list[Parts] = [()]
        if not whole:
            assert marker is not None
            changes = conn.execute(
                f"SELECT seq, path, action FROM {SCHEMA}.history WHERE project = %s AND "
                "seq > %s ORDER BY seq", (self.key, marker.seq)).fetchall()
            # A purge drops a path's records, maybe a change we have not applied yet: its
            # path is read again too (a path that did not change is left as it is).
            touched = _outermost(p for _, path, _ in changes
                                 if (p := self._checked(path)) is not None)
            last = max([last, *(seq for seq, _, _ in changes)])
        if () in touched:
            rows = conn.execute(f"SELECT path, body FROM {SCHEMA}.notes WHERE project = %s",
                                (self.key,)).fetchall()
        else:
            names = ["/".join(p) for p in touched]
            rows = conn.execute(
                f"SELECT path, body FROM {SCHEMA}.notes WHERE project = %s AND "
                "(path = ANY(%s) OR path LIKE ANY(%s))",
                (self.key, names, [like_prefix(n) for n in names])).fetchall()
        held = self._rows(rows)
        if whole and _empty(self.root):
            changed = self._fill(held)
        else:
            changed = sum(self._sync(prefix, {p: body for p, body in held.items()
                                              if p[:len(prefix)] == prefix})
                          for prefix in touched)
        self._write_marker(last)
        return changed

    def _checked(self, path: str) -> Parts | None:
        """The parts of a path the server named, or None (warned) when it is not one."""
        try:
            return check_relative(path)
        except MemoryPathError as exc:
            log.warning("shared project memory %s: the server's path %r skipped: %s",
                        self.key, path, exc)
            return None

    def _rows(self, rows: list[tuple[str, str | None]]) -> Rows:
        held: Rows = {}
        for path, body in rows:
            parts = self._checked(path)
            if not parts:
                continue  # refused, or the root itself
            if body is not None and not is_note_name(parts[-1]):
                log.warning("shared project memory %s: the server's path %r skipped: only .md "
                            "and .txt files are notes", self.key, path)
                continue
            held[parts] = body
        return held

    def _sync(self, prefix: Parts, held: Rows) -> int:
        """Make prefix (and everything under it) what `held` says; how many paths changed."""
        keep = set(held) | {parts[:i] for parts in held for i in range(1, len(parts))}
        changed = 0
        base = self.root.joinpath(*prefix)
        if prefix and prefix not in keep:
            if base.is_symlink() or base.exists():
                remove(base)
                changed += 1
            return changed
        if base.is_dir() and not base.is_symlink():
            changed += self._remove_strays(base, prefix, keep)
        for parts in sorted(keep):
            if parts[:len(prefix)] == prefix and parts != ():
                changed += self._write(parts, held.get(parts))
        return changed

    def _fill(self, held: Rows) -> int:
        """A first sync into an empty copy (a new home, a CI runner): each row made where it
        belongs, a note's file created at once, no temporary file (nobody has read this copy
        yet, and a torn file is written again by the next catch-up's check), its folders made
        once: a fifth of the careful path's system calls at 10,000 notes."""
        made: set[Path] = set()
        for parts, body in sorted(held.items()):
            path = self.root.joinpath(*parts)
            try:
                if body is None:
                    path.mkdir(parents=True, exist_ok=True)
                    continue
                if path.parent not in made:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    made.add(path.parent)
                with open(path, "xb") as file:  # O_EXCL: never through a link planted there
                    file.write(body.encode("utf-8"))
            except OSError as exc:  # a tampered row (a note where a folder is): skipped
                log.warning("shared project memory %s: the server's path %r skipped: %s",
                            self.key, "/".join(parts), exc.strerror or exc)
        return len(held)

    def _remove_strays(self, base: Path, prefix: Parts, keep: set[Parts]) -> int:
        """Remove what is under base and not in keep (hidden entries are not notes: left)."""
        changed = 0
        for dirpath, dirnames, filenames in os.walk(base):
            here = Path(dirpath)
            at = prefix + here.relative_to(base).parts
            for name in [*dirnames, *filenames]:
                full = here / name
                if name.startswith(".") or ((*at, name) in keep and not full.is_symlink()):
                    continue
                remove(full)
                changed += 1
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and (*at, d) in keep
                           and (here / d).is_dir()]
        return changed

    def _write(self, parts: Parts, body: str | None) -> int:
        """Make one path a folder (body None) or a note holding body; 1 when it changed."""
        path = self.root.joinpath(*parts)
        for i in range(1, len(parts)):  # a note or a link where a folder belongs goes first
            above = self.root.joinpath(*parts[:i])
            if above.is_symlink() or (above.exists() and not above.is_dir()):
                remove(above)
        try:
            ensure_inside(Location("project", parts, self.root, path), self.root.resolve())
        except MemoryPathError as exc:
            log.warning("shared project memory %s: the server's path %r skipped: %s",
                        self.key, "/".join(parts), exc)
            return 0
        if body is None:
            if path.is_dir() and not path.is_symlink():
                return 0
            if path.is_symlink() or path.exists():
                remove(path)
            path.mkdir(parents=True)
            return 1
        data = body.encode("utf-8")
        if path.is_symlink() or path.is_dir():
            remove(path)
        elif path.is_file() and path.read_bytes() == data:
            return 0
        write_atomic(path, data, durable=False)
        return 1

    def _marker(self) -> _Marker | None:
        try:
            found = json.loads(self._marker_file.read_text(encoding="utf-8"))
            if found["key"] != self.key:
                return None  # another key's copy: made again from the server
            return _Marker(int(found["seq"]), str(found["synced_at"]))
        except (OSError, ValueError, TypeError, KeyError):
            return None  # none, or torn: a cache file, made again by a first sync

    def _write_marker(self, seq: int) -> None:
        write_json_atomic(self._marker_file,
                          {"key": self.key, "seq": seq, "synced_at": now_iso()}, durable=False)


def _empty(folder: Path) -> bool:
    """Whether folder holds nothing (or is not there yet)."""
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is None
    except FileNotFoundError:
        return True


def _outermost(paths: Any) -> list[Parts]:
    """The paths not under another of them (a folder's catch-up covers what it holds)."""
    found: list[Parts] = []
    for parts in sorted(set(paths), key=len):
        if not any(parts[:len(p)] == p for p in found):
            found.append(parts)
    return found
