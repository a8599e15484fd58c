"""Changes held for the user's approval: made as they were proposed, or dropped.

Approving over a path that changed since the change was held is refused: the user approved
a diff against the text they saw.
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
    """Make a held change, journaled with the source that proposed it."""
    journal = journal_of(store)
    held = held_change(store, pending_id)
    loc = location_of(held.scope, held.root, held.path)
    with store.locked(loc, "approve"):
        now = capture(loc.path)
        if now.state != held.before:
            raise ChangedSince(f"{loc.display} changed since {held.id} was held; nothing was "
                            "written (reject it, or ask again)")
        # The hold goes with the change's completion: a crash leaves it held or made, not both.
        with store.recording(loc, held.action, now, restoring(held.after, journal.blob),
                             source=held.source if by is None else by, releases=held.id):
            apply(loc.path, held.after, journal.blob, root=loc.root)
        journal.release(held.id)  # when nothing was recorded (no journal, nothing changes)
    return held


def reject(store: MemoryStore, pending_id: str) -> Held:
    """Drop a held change: nothing is written."""
    held = held_change(store, pending_id)
    journal_of(store).release(held.id)
    return held
