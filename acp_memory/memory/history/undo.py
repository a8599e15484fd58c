"""Undo: put a path back as it was before a journaled change, itself journaled as `undo`.

Refused, unless forced, when the path was changed again since (naming the later change) or
edited outside acp-memory (its bytes are not what the change left).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from acp_memory.memory.history.journal import Change, Journal
from acp_memory.memory.history.states import Captured, apply, capture, notes_in
from acp_memory.memory.roots import Location, MemoryPathError, check_relative, ensure_inside
from acp_memory.memory.store import MemoryStore, NoteError


class UnknownChange(NoteError):
    """No change (or held change) has that id, or it is past the history's days."""


class ChangedSince(NoteError):
    """The path is no longer as the change left it: undoing would lose what came after."""


@dataclass(frozen=True)
class Undone:
    change: Change  # the change undone
    display: str  # its path as scope:rel
    restored: int  # notes the undo brought back (a folder's count)
    undo_id: str | None = None  # the undo's own change in the history


def location_of(scope: str, root: str, path: str) -> Location:
    """The checked location a journal record names (any project's root, not only this one's)."""
    try:
        parts = check_relative(path)
        root_dir = Path(root)
        loc = Location(scope, parts, root_dir, root_dir.joinpath(*parts))
        ensure_inside(loc)
    except MemoryPathError as exc:
        raise NoteError(str(exc)) from None
    return loc


def journal_of(store: MemoryStore) -> Journal:
    if store.journal is None:
        raise NoteError("this store keeps no history")
    return store.journal


def undo(store: MemoryStore, change_id: str, *, force: bool = False) -> Undone:
    """Undo one change by its id."""
    return undo_changes(store, [find_change(journal_of(store), change_id)], force=force)[0]


def find_change(journal: Journal, change_id: str) -> Change:
    """The journaled change with that id, or UnknownChange."""
    change = journal.change(change_id.strip())
    if change is None:
        raise UnknownChange(f"no change {change_id!r} in the memory history "
                            f"(kept {journal.keep_days or 'all'} days); see `notes log`")
    return change


def undo_changes(store: MemoryStore, changes: list[Change], *, force: bool = False) -> list[Undone]:
    """Undo changes (newest first) in one step: each checked against what came after it
    other than the others, and the ones before it restored in turn."""
    journal = journal_of(store)
    ours = {c.id for c in changes}
    done: list[Undone] = []
    for change in sorted(changes, key=lambda c: c.seq, reverse=True):
        loc = location_of(change.scope, change.root, change.path)
        shown = loc.display + ("/" if change.action in ("mkdir", "rmdir") else "")
        with store.locked(loc, "undo"):
            now = capture(loc.path)
            if not force:
                later = [c for c in journal.later(change)
                         if c.id not in ours and c.undoes not in ours]
                if later:
                    raise ChangedSince(
                        f"{shown} was changed again since {change.id} by {later[0].id} "
                        f"({later[0].action}, {later[0].time}); nothing was undone "
                        "(force the undo to override)")
                if now.state != change.after:
                    raise ChangedSince(
                        f"{shown} was edited outside acp-memory since {change.id} (a hand "
                        "edit); nothing was undone (force the undo to override)")
            with store.recording(loc, "undo", now, Captured(change.before),
                                 undoes=change.id) as undo_id:
                apply(loc.path, change.before, journal.blob)
        done.append(Undone(change, shown, notes_in(change.before, journal.blob), undo_id))
    return done
