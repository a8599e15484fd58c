"""The history of a store's roots as one journal: each call goes to the journal of the root it
names, the disk journal (`journal.py`, under the home) for a root on disk and a shared
project root's own (`memory/shared/journal.py`, in PostgreSQL) for that root, so that undo,
approval, the log and provenance do not know which kind of root they touch.

A shared journal's server out of reach is `HistoryOffline` (a `JournalError`, so every
reader's fallback applies) with the one line that says so; a write's refusal says it too. A
change refused because the team's server holds something else at its path is a
`HistoryConflict`, whose line the store gives as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from acp_memory.memory.history.journal import Journal, JournalError, Part
from acp_memory.memory.history.purge import purge as purge_disk
from acp_memory.memory.history.records import Change, ChangeSource, Held
from acp_memory.memory.history.runs import RunCost
from acp_memory.memory.history.states import Captured, manifest

Where = tuple[str, Path, str]  # (scope, root, path)


class HistoryOffline(JournalError):
    """A shared root's server cannot be reached now; the message is the one line that says
    so (the DSN masked)."""


class HistoryConflict(JournalError):
    """A change refused because a shared root's server holds something else at its path now
    (someone on the team changed it); the message is the whole line a user reads."""


class RootJournal(Protocol):
    """What the journal of one shared root offers (`SharedJournal` is one)."""

    @property
    def root(self) -> Path: ...

    def blob(self, h: str) -> bytes: ...
    def redacted(self, state: str | None) -> int: ...
    def recording(self, where: Where, action: str, before: Captured, after: Captured,
                  source: ChangeSource, *, current: Callable[[], Captured],
                  undoes: str | None = None,
                  releases: str | None = None) -> contextlib.AbstractContextManager[str]: ...
    def holding(self) -> contextlib.AbstractContextManager[None]: ...
    def change(self, change_id: str) -> Change | None: ...
    def changes(self, roots: Iterable[Path], path: str | None = None, limit: int = 50, *,
                task_id: str | None = None, session_id: str | None = None) -> list[Change]: ...
    def later(self, change: Change) -> list[Change]: ...
    def last_of_each(self, notes: Sequence[tuple[Path, str]]
                     ) -> tuple[list[Change | None], dict[str, bytes]]: ...
    def hold(self, where: Where, action: str, before: Captured, after: Captured,
             source: ChangeSource, *, reason: str | None = None,
             parts: Sequence[Part] = ()) -> Held: ...
    def held(self, *, session_id: str | None = None) -> list[Held]: ...
    def held_one(self, pending_id: str) -> Held | None: ...
    def release(self, pending_id: str) -> bool: ...
    def purge(self, where: Where, source: ChangeSource) -> tuple[int, str | None]: ...


class Journals:
    """The disk journal and the shared roots' journals behind the Journal interface."""

    def __init__(self, disk: Journal, shared: Sequence[RootJournal] = ()) -> None:
        self.disk = disk
        self._shared = {str(j.root): j for j in shared}
        self.now = disk.now  # the clock every change is stamped by
        self.keep_days = disk.keep_days
        self.pending_days = disk.pending_days

    def close(self) -> None:
        """Close the disk journal (a shared one belongs to its process-wide root)."""
        self.disk.close()

    def shared_of(self, root: Path | str) -> RootJournal | None:
        """The shared journal of root, or None for a root on disk."""
        return self._shared.get(str(root))

    def _all(self) -> list[Journal | RootJournal]:
        return [self.disk, *self._shared.values()]

    def _of(self, root: Path | str) -> Journal | RootJournal:
        return self._shared.get(str(root)) or self.disk

    @contextlib.contextmanager
    def _reaching(self, journal: Journal | RootJournal) -> Iterator[None]:
        """A shared journal's server out of reach, inside, as HistoryOffline."""
        if journal is self.disk:
            yield
            return
        from acp_memory.memory.shared.database import SharedUnavailable  # only when shared

        try:
            yield
        except SharedUnavailable as exc:
            raise HistoryOffline(str(exc)) from None

    # -- by root ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def holding(self, root: Path) -> Iterator[None]:
        """What root's lock adds for a shared root (its transaction, its copy caught up);
        nothing for a root on disk."""
        shared = self.shared_of(root)
        if shared is None:
            yield
            return
        with self._reaching(shared), shared.holding():
            yield

    @contextlib.contextmanager
    def recording(self, where: Where, action: str, before: Captured, after: Captured,
                  source: ChangeSource, *, current: Callable[[], Captured],
                  undoes: str | None = None, releases: str | None = None) -> Iterator[str]:
        """`Journal.recording` in the journal of where's root."""
        journal = self._of(where[1])
        with self._reaching(journal), journal.recording(
                where, action, before, after, source, current=current, undoes=undoes,
                releases=releases) as change_id:
            yield change_id

    def hold(self, where: Where, action: str, before: Captured, after: Captured,
             source: ChangeSource, *, reason: str | None = None,
             parts: Sequence[Part] = ()) -> Held:
        """Keep a change for approval in the journal of where's root (with its reason and
        the other paths of that root it makes)."""
        journal = self._of(where[1])
        with self._reaching(journal):
            return journal.hold(where, action, before, after, source, reason=reason,
                                parts=parts)

    def recover(self, root: Path, current: Callable[[str], Captured]) -> int:
        """Settle a dead writer's intents on root (a shared root has none: its database is
        the journal)."""
        return 0 if self.shared_of(root) else self.disk.recover(root, current)

    def has_intents(self, root: Path) -> bool:
        return False if self.shared_of(root) else self.disk.has_intents(root)

    def later(self, change: Change) -> list[Change]:
        journal = self._of(change.root)
        with self._reaching(journal):
            return journal.later(change)

    def last_of(self, root: Path, path: str) -> Change | None:
        return self.last_of_each([(root, path)])[0][0]

    def last_of_each(
        self, notes: Sequence[tuple[Path, str]]
    ) -> tuple[list[Change | None], dict[str, bytes]]:
        """`Journal.last_of_each`, each root's notes asked of its journal."""
        if not self._shared:
            return self.disk.last_of_each(notes)
        found: list[Change | None] = [None] * len(notes)
        manifests: dict[str, bytes] = {}
        for journal in self._all():
            mine = [i for i, (root, _) in enumerate(notes) if self._of(root) is journal]
            if not mine:
                continue
            with self._reaching(journal):
                lasts, held = journal.last_of_each([notes[i] for i in mine])
            for i, last in zip(mine, lasts, strict=True):
                found[i] = last
            manifests.update(held)
        return found, manifests

    def purge(self, where: Where, source: ChangeSource) -> tuple[int, str | None]:
        """Drop every record of where's path from its root's journal (`purge.py`'s rules)."""
        shared = self.shared_of(where[1])
        if shared is None:
            return purge_disk(self.disk, where, source)
        with self._reaching(shared):
            return shared.purge(where, source)

    # -- merged ----------------------------------------------------------------------------

    def changes(
        self,
        roots: Iterable[Path],
        path: str | None = None,
        limit: int = 50,
        *,
        task_id: str | None = None,
        session_id: str | None = None,
    ) -> list[Change]:
        """Done changes of the roots, newest first (by time across journals)."""
        wanted = list(roots)
        found: list[Change] = []
        for journal in self._all():
            mine = [r for r in wanted if self._of(r) is journal]
            if mine or journal is self.disk:  # the disk journal answers even for none
                with self._reaching(journal):
                    found += journal.changes(mine, path, limit, task_id=task_id,
                                             session_id=session_id)
        if not self._shared:
            return found
        found.sort(key=lambda c: c.time, reverse=True)  # stable: each journal's order kept
        return found[:limit] if limit > 0 else found

    def held(self, *, session_id: str | None = None) -> list[Held]:
        """The changes waiting for approval in every journal, oldest first."""
        found: list[Held] = []
        for journal in self._all():
            with self._reaching(journal):
                found += journal.held(session_id=session_id)
        return sorted(found, key=lambda h: h.time) if self._shared else found

    # -- the first that has it -------------------------------------------------------------

    def change(self, change_id: str) -> Change | None:
        for journal in self._all():
            with self._reaching(journal):
                if (change := journal.change(change_id)) is not None:
                    return change
        return None

    def held_one(self, pending_id: str) -> Held | None:
        for journal in self._all():
            with self._reaching(journal):
                if (held := journal.held_one(pending_id)) is not None:
                    return held
        return None

    def release(self, pending_id: str) -> bool:
        """Forget a held change, in whichever journal holds it."""
        for journal in self._all():
            with self._reaching(journal):
                if journal.release(pending_id):
                    return True
        return False

    def blob(self, h: str) -> bytes:
        """The bytes stored under a hash, in whichever journal stored them (the disk
        journal's error when none did)."""
        if not self._shared:
            return self.disk.blob(h)
        missing: JournalError | None = None
        for journal in self._all():
            try:
                with self._reaching(journal):
                    return journal.blob(h)
            except JournalError as exc:
                missing = missing or exc
        assert missing is not None
        raise missing

    def manifest_of(self, state: str) -> dict[str, Any]:
        return manifest(state, self.blob)

    def redacted(self, state: str | None) -> int:
        """How many secrets the contents a state names lost when stored, as the journal
        that stored them counts."""
        if state is None:
            return 0
        holder = self._holder(state.partition(":")[2])
        with self._reaching(holder):
            return holder.redacted(state)

    def _holder(self, h: str) -> Journal | RootJournal:
        """The first journal storing h (the disk journal when none does)."""
        if not self._shared:
            return self.disk
        for journal in self._all():
            with contextlib.suppress(JournalError), self._reaching(journal):
                journal.blob(h)
                return journal
        return self.disk

    def prune(self) -> None:
        self.disk.prune()

    # -- the disk journal alone: read stamps and run costs are this process's own ----------

    def reads(self, root: Path) -> dict[str, str]:
        return self.disk.reads(root)

    def mark_reads(self, stamps: Iterable[tuple[Path, str, str]],
                   run: RunCost | None = None) -> None:
        self.disk.mark_reads(stamps, run)

    def record_run(self, session_id: str, task_id: str, cost: dict[str, int]) -> None:
        self.disk.record_run(session_id, task_id, cost)

    def costs_per_day(self, limit_days: int = 0) -> list[dict[str, Any]]:
        return self.disk.costs_per_day(limit_days)
