"""Undo: put paths back as they were before journaled changes, each undo itself journaled as
`undo`.

Undoing several changes (a memory run's) is all or nothing: under the lock of every root they
touch (global first), each change is checked against the paths as the undos before it will
have left them, and only when none is refused is any applied. A change is refused, unless
forced, when its path was changed again since (naming the later change), edited outside
acp-memory (its bytes are not what the change left), or already undone (naming that undo).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from acp_memory.memory.history.journals import Journals
from acp_memory.memory.history.records import Change
from acp_memory.memory.history.states import (
    DIR,
    NOTE,
    apply,
    capture,
    folder,
    manifest,
    notes_in,
    restoring,
)
from acp_memory.memory.roots import Location, MemoryPathError, check_relative, ensure_inside
from acp_memory.memory.store import MemoryStore, NoteError


class UnknownChange(NoteError):
    """No change (or held change) has that id, or it is past the history's days."""


class ChangedSince(NoteError):
    """The path is no longer as the change left it: undoing would lose what came after."""


class UndoRefused(ChangedSince):
    """An undo refused before anything was applied; the message names the path and why."""

    def __init__(self, reason: str, detail: str = "", *, overridable: bool = True) -> None:
        super().__init__(reason + detail)
        self.reason = reason  # the path and the change refused, without the detail
        self.overridable = overridable  # whether forcing it would change anything


@dataclass(frozen=True)
class Undone:
    change: Change  # the change undone
    display: str  # its path as scope:rel
    restored: int  # notes the undo brought back (a folder's count)
    undo_id: str | None = None  # the undo's own change in the history
    redacted: int = 0  # secrets the restored text lacks: the history keeps contents redacted


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


def journal_of(store: MemoryStore) -> Journals:
    if store.journal is None:
        raise NoteError("this store keeps no history")
    return store.journal


def find_change(journal: Journals, change_id: str) -> Change:
    """The journaled change with that id, or UnknownChange."""
    change = journal.change(change_id.strip())
    if change is None:
        raise UnknownChange(f"no change {change_id!r} in the memory history "
                            f"(kept {journal.keep_days or 'all'} days); see `notes log`")
    return change


def undo(store: MemoryStore, change_id: str, *, force: bool = False) -> Undone:
    """Undo one change by its id."""
    return undo_changes(store, [find_change(journal_of(store), change_id)], force=force)[0]


def shown(change: Change) -> str:
    """The change's path as scope:rel, a folder's with a slash."""
    return f"{change.scope}:{change.path}" + ("/" if change.action in ("mkdir", "rmdir") else "")


def undone_by(journal: Journals, change: Change) -> Change | None:
    """The undo that reverted change, if one did and was not itself undone."""
    return _undo_of(change, journal.later(change))


def _undo_of(change: Change, after: list[Change]) -> Change | None:
    undo = next((c for c in reversed(after) if c.undoes == change.id), None)
    if undo is None or any(c.undoes == undo.id for c in after):
        return None
    return undo


def undo_changes(
    store: MemoryStore, changes: list[Change], *, force: bool = False,
    done_already: Iterable[Change] = (),
) -> list[Undone]:
    """Undo changes, newest first, all or none (UndoRefused). `done_already` are changes of
    the same set undone before: what they and their undos did is not held against the rest."""
    journal = journal_of(store)
    ordered = sorted(changes, key=lambda c: c.seq, reverse=True)
    for change in ordered:
        if change.action == "purge":  # it recorded no content: there is nothing to put back
            raise NoteError(f"{change.id} purged the history of {shown(change)}; a purge "
                            "cannot be undone")
    ours = {c.id for c in ordered} | {c.id for c in done_already}
    scopes = {c.root: c.scope for c in ordered}  # each root locked once
    with contextlib.ExitStack() as locks:
        # Global first: two undos over both roots never each hold the lock the other waits on.
        for root, scope in sorted(scopes.items(), key=lambda rs: (rs[1] != "global", rs)):
            locks.enter_context(store.locked(location_of(scope, root, ""), "undo"))
        if not force:
            plan = _Plan(journal, ordered)
            for change in ordered:
                _check(journal, change, ours, plan.state(change))
                plan.apply(change)
        return [_undo_one(store, journal, change) for change in ordered]


def _check(journal: Journals, change: Change, ours: set[str], now: str | None) -> None:
    """Refuse the undo of change when its path is not as the change left it."""
    after = journal.later(change)
    undo = _undo_of(change, after)
    if undo is not None:
        raise UndoRefused(f"{shown(change)}: {change.id} already undone by {undo.id}",
                          overridable=False)
    later = [c for c in after if c.id not in ours and c.undoes not in ours]
    if later:
        first = later[0]
        raise UndoRefused(f"{shown(change)} changed since ({change.id})", f": by {first.id} "
                          f"({first.action}, {first.time[:19].replace('T', ' ')})")
    if now != change.after:
        raise UndoRefused(f"{shown(change)} changed since ({change.id})",
                          ": edited outside acp-memory (a hand edit)")


def _undo_one(store: MemoryStore, journal: Journals, change: Change) -> Undone:
    loc = location_of(change.scope, change.root, change.path)
    now = capture(loc.path)
    with store.recording(loc, "undo", now, restoring(change.before, journal.blob),
                         undoes=change.id) as undo_id:
        apply(loc.path, change.before, journal.blob, root=loc.root)
    return Undone(change, shown(change), notes_in(change.before, journal.blob), undo_id,
                  journal.redacted(change.before))


# -- the paths as the undos will leave them ----------------------------------------------------

Entry = tuple[str, str]  # ("file", hash), ("link", target) or ("dir", "")


class _Plan:
    """What the paths a set of undos touches hold, step by step, before any step is made: the
    files under each touched path (read once from disk), changed as `states.apply` would."""

    def __init__(self, journal: Journals, changes: list[Change]) -> None:
        self.journal = journal
        self.views: dict[str, dict[str, Entry]] = {}
        for change in changes:
            paths = [c.path for c in changes if c.root == change.root]
            if any(_under(change.path, other) for other in paths if other != change.path):
                continue  # read with the folder holding it
            now = capture(location_of(change.scope, change.root, change.path).path)
            view = self.views.setdefault(change.root, {})
            view.update(_flat(change.path, now.state, now.blobs.__getitem__))

    def state(self, change: Change) -> str | None:
        """What change's path holds once the undos planned so far are made."""
        view, path = self.views[change.root], change.path
        entry = view.get(path)
        if entry is not None and entry[0] == "file":
            return NOTE + entry[1]
        if entry is not None and entry[0] == "link":  # read through the link, as capture does
            return capture(location_of(change.scope, change.root, path).path).state
        under = {rel[len(path) + 1:]: e for rel, e in view.items() if _under(rel, path)}
        if entry is None and not under:
            return None
        return folder([r for r, (kind, _) in under.items() if kind == "dir"],
                      {r: h for r, (kind, h) in under.items() if kind == "file"},
                      {r: t for r, (kind, t) in under.items() if kind == "link"}, {}).state

    def apply(self, change: Change) -> None:
        """Plan the undo of change: its path put back to its before, as `states.apply` does."""
        view, path, state = self.views[change.root], change.path, change.before
        entry = view.get(path)
        if state is None or (state.startswith(NOTE) and entry and entry[0] == "dir"):
            for rel in [r for r in view if r == path or _under(r, path)]:
                del view[rel]
        if state is None:
            return
        parts = path.split("/")
        for i in range(1, len(parts)):  # a write makes the folders holding it
            view.setdefault("/".join(parts[:i]), ("dir", ""))
        if entry is not None and entry[0] != "dir" and state.startswith(DIR):
            del view[path]
        left = restoring(state, self.journal.blob)  # the contents as stored: redacted
        for rel, new in _flat(path, left.state, left.blobs.__getitem__).items():
            if new[0] == "link" and rel in view:
                continue  # states.apply keeps what is at a link's place
            view[rel] = new


def _flat(path: str, state: str | None, blob: Callable[[str], bytes]) -> dict[str, Entry]:
    """The entries a state puts at path: a note, or a folder with everything under it."""
    if state is None:
        return {}
    if state.startswith(NOTE):
        return {path: ("file", state[len(NOTE):])}
    held = manifest(state, blob)
    dirs, files, links = held["dirs"], held["files"], held["links"]
    assert isinstance(files, dict) and isinstance(links, dict)
    flat: dict[str, Entry] = {path: ("dir", "")}
    flat.update({f"{path}/{rel}": ("dir", "") for rel in dirs})
    flat.update({f"{path}/{rel}": ("file", h) for rel, h in files.items()})
    flat.update({f"{path}/{rel}": ("link", target) for rel, target in links.items()})
    return flat


def _under(rel: str, folder_path: str) -> bool:
    return rel.startswith(folder_path + "/")
