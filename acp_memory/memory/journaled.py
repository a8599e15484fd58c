"""What every write of a store holds: its root's lock (`rootlock.py`) and, for a shared project
root, the database transaction that goes with it; the record of each change in the history of
its root (`history/journals.py`); the read stamps a memory run collects; and the shared root
caught up before a read.

A store is one of these (`store.py`): this part knows the roots, the history and the lock,
not what a note is.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from acp_memory.config import Config, Paths
from acp_memory.memory.history.journal import Journal, JournalError
from acp_memory.memory.history.journals import (
    HistoryConflict,
    HistoryOffline,
    Journals,
    RootJournal,
)
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.history.runs import RunCost
from acp_memory.memory.history.states import Captured, capture
from acp_memory.memory.index.indexes import SearchIndexes
from acp_memory.memory.rootlock import RootBusy, root_lock
from acp_memory.memory.roots import CheckedRoots, Location, MemoryPathError, Roots
from acp_memory.timestamps import iso

log = logging.getLogger(__name__)

# Where earlier versions kept the root's lock, inside the root: removed when seen.
LEGACY_LOCK_NAME = ".acp-memory.lock"


class NoteError(Exception):
    """A refused memory operation; the message is written for a model or a user to read."""


class SharedProject(Protocol):
    """What the store uses of a shared project root (`memory/shared/root.py: SharedRoot`)."""

    key: str

    @property
    def journal(self) -> RootJournal: ...
    @property
    def root(self) -> Path: ...
    def refresh(self) -> str | None: ...
    def share_vectors(self, indexes: SearchIndexes) -> None: ...


def shared_project(cfg: Config, paths: Paths, roots: Roots) -> SharedProject | None:
    """This process's shared root of the roots' project, when it is shared."""
    if roots.shared_key is None:
        return None
    from acp_memory.memory.shared.root import shared_root_for  # psycopg: only when shared

    return shared_root_for(cfg, paths, roots.shared_key)


class JournaledRoots:
    """A store's roots with their locks and their history (see the module's docstring)."""

    def __init__(self, roots: Roots, indexes: SearchIndexes, journal: Journal | Journals | None,
                 source: ChangeSource, shared: SharedProject | None, lock_timeout: float) -> None:
        self.roots = roots
        self.indexes = indexes
        # Without a journal (tests of the store alone) changes are not recorded.
        self.journal = Journals(journal) if isinstance(journal, Journal) else journal
        self.source = source  # who is changing the notes through this store
        self.shared = shared  # the project root's shared side, when it is shared
        self.offline = ""  # the shared root's offline marker as the last read found it
        self.lock_timeout = lock_timeout  # seconds a write waits for another process's lock
        self._reads: dict[tuple[Path, str], str] = {}  # (root, rel): when, until close()

    def locate(self, path: str, checked: CheckedRoots | None = None) -> Location:
        try:
            return self.roots.locate(path, checked)
        except MemoryPathError as exc:
            raise NoteError(str(exc)) from None

    def _ensure_inside(self, loc: Location) -> None:
        # Checked again under the lock: a symlink may have appeared since locate().
        try:
            self.roots.join(loc.scope, loc.rel)
        except MemoryPathError as exc:
            raise NoteError(str(exc)) from None

    def refresh(self, scopes: Sequence[str]) -> str:
        """Catch a shared project root's local copy up (at most once a second) when scopes
        reach it; its offline marker (`shared memory offline: synced <time>`), else ""."""
        if self.shared is None or "project" not in scopes:
            return ""
        self.offline = self.shared.refresh() or ""
        return self.offline

    # -- the history -------------------------------------------------------------------------

    def stamp_read(self, loc: Location) -> None:
        """A memory run read the note at loc now: kept here and journaled with the store's
        other stamps when it closes (the run's end), in one write, so that concurrent runs do
        not queue on the journal for each read."""
        if self.journal is not None:
            self._reads[(loc.root, loc.rel)] = iso(self.journal.now())

    def _write_reads(self, run: RunCost | None) -> None:
        reads, self._reads = self._reads, {}
        if (not reads and run is None) or self.journal is None:
            return
        stamps = list(reads.items())  # at once: an abandoned read's thread may still add one
        try:
            self.journal.mark_reads(((root, rel, when) for (root, rel), when in stamps), run)
        except JournalError as exc:  # a missed stamp only makes `notes stale` stricter
            cost = f" and the cost of {run.task_id}" if run is not None else ""
            log.warning("read stamps%s not recorded: %s", cost, exc)

    @contextlib.contextmanager
    def recording(
        self,
        loc: Location,
        action: str,
        before: Captured,
        after: Captured,
        *,
        undoes: str | None = None,
        source: ChangeSource | None = None,
        releases: str | None = None,
    ) -> Iterator[str | None]:
        """Journal the change of loc from before to after that the caller makes inside,
        holding the root's lock, as made by source (default the store's); yields the change's
        id (None when nothing is recorded). A journal that cannot be written refuses the
        change before anything is written. A shared root's change is committed on its server
        before the caller writes the local copy, which only ever lags the server: a copy that
        cannot be written then is a warning, the next catch-up bringing it. `releases`: the
        held change this one makes, dropped when it completes."""
        if self.journal is None or before.state == after.state:
            yield None  # no history kept, or nothing changes: nothing to record
            return
        try:
            recording = self.journal.recording(
                (loc.scope, loc.root, loc.rel), action, before, after, source or self.source,
                current=lambda: capture(loc.path), undoes=undoes, releases=releases)
            with recording as change_id:
                yield change_id
        except HistoryOffline:
            raise  # the lock's holder says it: the write is refused, nothing was written
        except HistoryConflict as exc:  # its line names the note and says nothing was written
            raise NoteError(str(exc)) from None
        except JournalError as exc:
            raise NoteError(f"cannot record the change of {loc.display} in {exc}; "
                            "nothing was written") from None
        except MemoryPathError as exc:  # a record of the history that would leave the root
            raise NoteError(f"cannot {action} {loc.display}: {exc}") from None

    @contextlib.contextmanager
    def locked(self, loc: Location, doing: str) -> Iterator[None]:
        """Hold loc's root lock (as every write does), intents a dead writer left settled."""
        with self._locked(loc, doing):
            yield

    def settle(self) -> None:
        """Settle the changes a writer that died mid-change left in the journal, before the
        history is read: each root with such intents is locked briefly (the others, never)."""
        if self.journal is None:
            return
        for scope in self.roots.scopes():
            loc = self.locate(f"{scope}:")
            if self.journal.has_intents(loc.root):
                with self._locked(loc, "settle the history of"):
                    pass  # taking the lock settles them

    @contextlib.contextmanager
    def _locked(self, loc: Location, doing: str) -> Iterator[None]:
        """Hold the root's lock (for a shared root, its transaction too, the local copy
        caught up first); a file system error (a read-only folder, say) on the way or inside
        becomes a NoteError naming the note and the file, a shared root's server out of
        reach one naming the server."""
        holding = self.journal.holding if self.journal is not None else _nothing
        try:
            with root_lock(loc.root, loc.scope, self.lock_timeout):
                with contextlib.suppress(OSError):  # absent, or a read-only root: nothing to do
                    (loc.root / LEGACY_LOCK_NAME).unlink()
                self._recover(loc.root)
                with holding(loc.root):
                    yield
        except RootBusy as exc:
            raise NoteError(str(exc)) from None
        except HistoryOffline as exc:
            raise NoteError(f"cannot {doing} {loc.display}: {exc}; nothing was written"
                            ) from None
        except OSError as exc:
            raise NoteError(f"cannot {doing} {loc.display}: {_describe(exc)}") from None
        self.indexes.notes_changed(loc.root)

    def _recover(self, root: Path) -> None:
        """Settle what a writer that died mid-change left in the journal (under the lock, so
        no live writer's intent is taken for a dead one's)."""
        if self.journal is None:
            return
        try:
            self.journal.recover(root, lambda rel: capture(root / rel) if rel else Captured(None))
        except JournalError as exc:
            log.warning("cannot settle the memory history: %s", exc)


@contextlib.contextmanager
def _nothing(root: Path) -> Iterator[None]:
    yield


def _describe(exc: OSError) -> str:
    """`file: reason`, the file as the system named it."""
    reason = exc.strerror or str(exc)
    return f"{os.fsdecode(exc.filename)}: {reason}" if exc.filename is not None else reason
