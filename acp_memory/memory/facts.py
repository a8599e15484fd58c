"""What the memory tools say of a note besides its text, in one place for search and read: when
it last changed and by whom, `(old)` past 90 days, and each path it cites that is gone from the
workspace; and the notes `notes stale` lists.

The lines, as a model reads them (the offline model parses exactly these):
    changed 2026-03-02, 9 months ago, by memory_run (old)
    cites src/old.py: not in the workspace
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from acp_memory.memory.cites import missing_paths
from acp_memory.memory.history.journal import JournalError
from acp_memory.memory.history.provenance import OLD_DAYS, Provenance, provenances
from acp_memory.memory.index.files import read_note, walk_notes
from acp_memory.memory.roots import CheckedRoots, Location
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.timestamps import iso, parse_iso, utc_now

OLD = "(old)"
NOT_IN_WORKSPACE = "not in the workspace"
MEMORY_RUN = "memory_run"  # the surface whose reads count as recalls for `notes stale`


def cite_line(path: str) -> str:
    return f"cites {path}: {NOT_IN_WORKSPACE}"


@dataclass(frozen=True)
class NoteFacts:
    """A note's provenance and missing cited paths, as of `now`."""

    provenance: Provenance
    missing: tuple[str, ...]
    now: datetime

    @property
    def old(self) -> bool:
        return self.provenance.is_old(self.now)

    def lines(self) -> list[str]:
        """The changed line (marked old past OLD_DAYS), then one line per cited path gone."""
        changed = self.provenance.describe(self.now) + (f" {OLD}" if self.old else "")
        return [changed, *(cite_line(p) for p in self.missing)]


def now_of(store: MemoryStore) -> datetime:
    """The time ages are counted to: the journal's clock, which stamps the changes."""
    return store.journal.now() if store.journal is not None else utc_now()


def note_facts(store: MemoryStore, loc: Location, data: bytes, mtime: float) -> NoteFacts:
    """The facts of the note at loc holding data (its file time mtime); cited paths are
    checked against the session's cwd, never outside it, and not at all without one."""
    return notes_facts(store, [(loc, data, mtime)])[0]


def notes_facts(store: MemoryStore,
                notes: Sequence[tuple[Location, bytes, float]]) -> list[NoteFacts]:
    """`note_facts` of each (loc, data, mtime), asking the journal once for all."""
    cwd = store.roots.cwd
    real_cwd = os.path.realpath(cwd) if cwd is not None else None
    now = now_of(store)
    origins = provenances(store.journal,
                          [(loc.root, loc.rel, data, mtime) for loc, data, mtime in notes])
    return [NoteFacts(origin, _missing(data, cwd, real_cwd), now)
            for (_, data, _), origin in zip(notes, origins, strict=True)]


def _missing(data: bytes, cwd: Path | None, real_cwd: str | None) -> tuple[str, ...]:
    if cwd is None:
        return ()
    return tuple(missing_paths(data.decode("utf-8", errors="replace"), cwd, real_cwd))


def hits_facts(store: MemoryStore, paths: Sequence[str]) -> dict[str, list[str]]:
    """The fact lines of a search's hits (scope:path each), each note read once, each root
    checked once and the journal asked once for all; none for a note gone since the search
    found it."""
    checked: CheckedRoots = {}
    found: list[tuple[str, tuple[Location, bytes, float]]] = []
    for path in paths:
        try:
            found.append((path, store.read_bytes(path, checked)))
        except NoteError:
            continue
    facts = notes_facts(store, [note for _, note in found])
    return {path: f.lines() for (path, _), f in zip(found, facts, strict=True)}


def read_result(store: MemoryStore, path: str) -> str:
    """memory_read's answer: the fact lines, a blank line, then the note's text unchanged. A
    memory run's read is stamped in the journal (for `notes stale`) when its store closes,
    never in the note."""
    loc, data, mtime = store.read_bytes(path)
    if store.source.surface == MEMORY_RUN:
        store.stamp_read(loc)
    text = data.decode("utf-8", errors="replace")
    body = text if text.strip() else f"{loc.display} is an empty note."
    return "\n".join(note_facts(store, loc, data, mtime).lines()) + "\n\n" + body


@dataclass(frozen=True)
class StaleNote:
    """A note `notes stale` lists: its cited paths gone, or no recall read it in N days."""

    scope: str
    path: str  # relative to its root
    changed: datetime  # the file's time
    last_read: datetime | None  # the last read by a memory run
    missing: tuple[str, ...]
    unread_days: int | None  # days since the last read (or change), when past the limit

    def reasons(self) -> list[str]:
        out = [cite_line(p) for p in self.missing]
        if self.unread_days is not None:
            out.append(f"not read by a recall in {self.unread_days} days" if self.last_read
                       else f"never read by a recall, changed {self.unread_days} days ago")
        return out

    def as_json(self) -> dict[str, Any]:
        """`{root, path, reasons, lastRead, changed, missing}` (times ISO 8601, lastRead null
        for a note never read)."""
        return {"root": self.scope, "path": self.path, "reasons": self.reasons(),
                "lastRead": iso(self.last_read) if self.last_read else None,
                "changed": iso(self.changed), "missing": list(self.missing)}


def stale_notes(store: MemoryStore, days: int = OLD_DAYS) -> list[StaleNote]:
    """The notes of both roots whose cited paths are gone from the store's cwd, or that no
    memory run read in `days` days (a note never read counts from its file time)."""
    now = now_of(store)
    cwd = store.roots.cwd
    found: list[StaleNote] = []
    for scope in store.roots.scopes():
        root = store.roots.root_of(scope)
        try:
            reads = store.journal.reads(root) if store.journal is not None else {}
        except JournalError as exc:
            raise NoteError(f"cannot tell when notes were last read: {exc}") from None
        for rel, stamp in sorted(walk_notes(root)):
            text = read_note(root, rel)
            if text is None:
                continue  # gone since the walk
            changed = datetime.fromtimestamp(stamp[0] / 1e9, UTC)
            last_read = parse_iso(reads[rel]) if rel in reads else None
            idle = now - (last_read or changed)
            unread = max(idle.days, 0) if idle > timedelta(days=days) else None
            missing = tuple(missing_paths(text, cwd)) if cwd is not None else ()
            if missing or unread is not None:
                found.append(StaleNote(scope, rel, changed, last_read, missing, unread))
    return found
