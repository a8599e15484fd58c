"""The memory history as one caller may touch it: the one home of its rules, which `/memory`,
`notes`, the HTTP routes (and so the web page) all call, each only parsing its input and
printing or serialising the answer.

A caller may touch the roots it is given: a session's two roots (another project's change or
held change is unknown to it, `not in the roots of this session`), or every root for the
`notes` CLI, which has no session. Every read settles a dead writer's change under the root's
lock first; a run is undone all or nothing; a refusal says how this surface forces it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from acp_memory.memory.history import pending
from acp_memory.memory.history.records import Change, Held
from acp_memory.memory.history.undo import (
    ChangedSince,
    Undone,
    UndoRefused,
    UnknownChange,
    find_change,
    journal_of,
    undo_changes,
    undone_by,
)
from acp_memory.memory.store import MemoryStore, NoteError

NOT_OURS = "not in the roots of this session"
TIDY_SURFACE = "tidy"  # the surface of a tidy run's held proposals


@dataclass(frozen=True)
class RunUndo:
    """A memory run's undo: how many changes the run made, and those this undo undid (none
    when every one was undone already)."""

    task_id: str
    changes: int
    undone: list[Undone]


@dataclass(frozen=True)
class Decision:
    """One held change approved or rejected, or why it was not (`refused`)."""

    held: Held
    refused: str | None = None


def seen_by(held: Held, session_id: str) -> bool:
    """Whether a session's list of held changes shows held: its own, and a tidy run's that
    belongs to no session (`notes tidy`, the background pass), which it would never see
    otherwise (the caller keeps to the session's roots)."""
    source = held.source
    return source.session_id == session_id or (
        source.session_id is None and source.surface == TIDY_SURFACE)


class History:
    """The history of the roots a caller may touch, through its store."""

    def __init__(self, store: MemoryStore, roots: Iterable[Path] | None, force_hint: str) -> None:
        self.store = store
        self.journal = journal_of(store)
        self._roots = None if roots is None else {str(r) for r in roots}
        self.force_hint = force_hint  # how this surface forces an undo: `add --force`, ...

    @classmethod
    def of_session(cls, store: MemoryStore, force_hint: str) -> History:
        """A session's: its own two roots only."""
        return cls(store, store.roots.dirs(), force_hint)

    @classmethod
    def of_every_root(cls, store: MemoryStore, force_hint: str) -> History:
        """The `notes` CLI's: it has no session, so no root is another's."""
        return cls(store, None, force_hint)

    def _ours(self, root: str) -> bool:
        return self._roots is None or root in self._roots

    # -- reading -------------------------------------------------------------------------------

    def changes(
        self,
        roots: Iterable[Path] | None = None,
        path: str | None = None,
        limit: int = 50,
        *,
        task_id: str | None = None,
        session_id: str | None = None,
    ) -> list[Change]:
        """Done changes newest first, of the store's roots unless told (settled first)."""
        self.store.settle()
        dirs = [r for r in (self.store.roots.dirs() if roots is None else roots)
                if self._ours(str(r))]
        return self.journal.changes(dirs, path, limit, task_id=task_id, session_id=session_id)

    def held(self, session_id: str | None = None) -> list[Held]:
        """The held changes of our roots, oldest first (those one session sees when given:
        see `seen_by`)."""
        self.store.settle()
        return [h for h in self.journal.held() if self._ours(h.root)
                and (session_id is None or seen_by(h, session_id))]

    def change(self, change_id: str) -> Change:
        """A change of our roots by its id, or UnknownChange."""
        self.store.settle()
        change = find_change(self.journal, change_id)
        if not self._ours(change.root):
            raise UnknownChange(f"change {change.id} is {NOT_OURS}")
        return change

    def held_change(self, pending_id: str, session_id: str | None = None) -> Held:
        """A held change of our roots (and of one session when given), or UnknownChange."""
        held = pending.held_change(self.store, pending_id)
        if not self._ours(held.root):
            raise UnknownChange(f"pending change {held.id} is {NOT_OURS}")
        if session_id is not None and not seen_by(held, session_id):
            raise UnknownChange(f"no pending change {held.id!r} in this session (approved, "
                                "rejected, or past memory.pending_days)")
        return held

    # -- undo ----------------------------------------------------------------------------------

    def undo(self, change_id: str, *, force: bool = False) -> Undone:
        """Undo one change of our roots; ChangedSince says why not and how to force it."""
        change = self.change(change_id)
        try:
            return undo_changes(self.store, [change], force=force)[0]
        except UndoRefused as exc:
            hint = f" ({self.force_hint})" if exc.overridable else ""
            raise ChangedSince(f"{exc}; nothing was undone{hint}") from None

    def undo_run(self, task_id: str, session_id: str, *, force: bool = False) -> RunUndo:
        """Undo the changes of a memory run in our roots that are not undone yet, all or
        none: ChangedSince names the first refused and how to force it."""
        changes = self.changes(limit=0, task_id=task_id, session_id=session_id)
        done = [c for c in changes if undone_by(self.journal, c) is not None]
        left = [c for c in changes if c not in done]
        if not left:
            return RunUndo(task_id, len(changes), [])
        try:
            undone = undo_changes(self.store, left, force=force, done_already=done)
        except UndoRefused as exc:
            # The run's line names the path and change alone, as the issue pins it: the
            # detail is one `notes log` away, and the line stays short enough to read.
            said = f"{exc.reason}; {self.force_hint}" if exc.overridable else str(exc)
            raise ChangedSince(f"Nothing was undone of memory run {task_id}: {said}") from None
        except NoteError as exc:
            raise NoteError(f"Nothing was undone of memory run {task_id}: {exc}") from None
        return RunUndo(task_id, len(changes), undone)

    # -- held changes --------------------------------------------------------------------------

    def approve(self, pending_id: str) -> Held:
        """Make a held change of our roots as it was proposed."""
        return pending.approve(self.store, self.held_change(pending_id).id)

    def reject(self, pending_id: str) -> Held:
        """Drop a held change of our roots."""
        return pending.reject(self.store, self.held_change(pending_id).id)

    def decide(self, approving: bool, wanted: str, session_id: str | None = None
               ) -> list[Decision]:
        """Approve or reject one held change (an unknown one is UnknownChange) or `all` of
        ours (of one session when given); each refused says why."""
        wanted = wanted.strip()
        helds = (self.held(session_id) if wanted == "all"
                 else [self.held_change(wanted, session_id)])
        decide = pending.approve if approving else pending.reject
        decisions: list[Decision] = []
        for held in helds:
            try:
                decisions.append(Decision(decide(self.store, held.id)))
            except NoteError as exc:
                decisions.append(Decision(held, str(exc)))
        return decisions
