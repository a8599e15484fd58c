"""Changes held for the user's approval: made as they were proposed, or dropped.

Approving over a path that changed since the change was held is refused: the user approved
a diff against the text they saw. A held change over several paths (a tidy run's merge) is
approved or rejected whole.
"""

from __future__ import annotations

from acp_memory.memory.history.records import ChangeSource, Held
from acp_memory.memory.history.states import apply, capture, restoring
from acp_memory.memory.history.undo import ChangedSince, UnknownChange, journal_of, location_of
from acp_memory.memory.store import MemoryStore


def held_change(store: MemoryStore, pending_id: str) -> Held:
    held = journal_of(store).held_one(pending_id.strip())
    if held is None:
        raise UnknownChange(f"no pending change {pending_id!r} (approved, rejected, or past "
                            "memory.pending_days); see `notes pending`")
    return held


def approve(store: MemoryStore, pending_id: str, *, by: ChangeSource | None = None) -> Held:
    """Make a held change, every path of it or none, each journaled with the source that
    proposed it."""
    journal = journal_of(store)
    held = held_change(store, pending_id)
    parts = [(location_of(held.scope, held.root, p.path), p) for p in held.all_parts]
    with store.locked(parts[0][0], "approve"):
        now = [capture(loc.path) for loc, _ in parts]
        for (loc, part), found in zip(parts, now, strict=True):
            if found.state != part.before:
                raise ChangedSince(f"{loc.display} changed since {held.id} was held; nothing "
                                   "was written (reject it, or ask again)")
        for i, ((loc, part), found) in enumerate(zip(parts, now, strict=True)):
            # The hold goes with the last path's completion: a crash leaves it held or made.
            last = i == len(parts) - 1
            with store.recording(loc, part.action, found, restoring(part.after, journal.blob),
                                 source=held.source if by is None else by,
                                 releases=held.id if last else None):
                apply(loc.path, part.after, journal.blob, root=loc.root)
        journal.release(held.id)  # when nothing was recorded (no journal, nothing changes)
    return held


def reject(store: MemoryStore, pending_id: str) -> Held:
    """Drop a held change: nothing is written."""
    held = held_change(store, pending_id)
    journal_of(store).release(held.id)
    return held
