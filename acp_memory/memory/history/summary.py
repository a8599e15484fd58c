"""A journaled change as people read it: the one-line summary of what it did, and the JSON
object `notes log --json` prints and the HTTP history answers."""

from __future__ import annotations

import difflib
from typing import Any

from acp_memory.memory.history.journal import Change, Journal, JournalError
from acp_memory.memory.history.states import NOTE, notes_in


def summary(change: Change, journal: Journal) -> str:
    """`+3 -1 lines`, `new note, 120 bytes`, `deleted, 120 bytes`, `folder with 3 notes`..."""
    try:
        return _summary(change, journal)
    except JournalError:
        return "(content no longer kept)"


def _summary(change: Change, journal: Journal) -> str:
    before, after = change.before, change.after
    prefix = f"undid {change.undoes}: " if change.action == "undo" else ""
    if before is None and after is None:
        return prefix + "no content"
    if after is None:
        if before is not None and before.startswith(NOTE):
            return f"{prefix}deleted, {len(journal.blob(before[len(NOTE):]))} bytes"
        return f"{prefix}deleted folder with {_notes(notes_in(before, journal.blob))}"
    if before is None:
        if after.startswith(NOTE):
            return f"{prefix}new note, {len(journal.blob(after[len(NOTE):]))} bytes"
        count = notes_in(after, journal.blob)
        return f"{prefix}folder" + (f" with {_notes(count)}" if count else "")
    if before.startswith(NOTE) and after.startswith(NOTE):
        old = journal.blob(before[len(NOTE):]).decode("utf-8", "replace").splitlines()
        new = journal.blob(after[len(NOTE):]).decode("utf-8", "replace").splitlines()
        added = removed = 0
        for line in difflib.unified_diff(old, new, lineterm="", n=0):
            if line.startswith("+") and not line.startswith("+++"):
                added += 1
            elif line.startswith("-") and not line.startswith("---"):
                removed += 1
        return f"{prefix}+{added} -{removed} lines"
    return f"{prefix}replaced ({_notes(notes_in(after, journal.blob))} now)"


def _notes(count: int) -> str:
    return f"{count} note" if count == 1 else f"{count} notes"


def change_json(change: Change, journal: Journal, root_name: str) -> dict[str, Any]:
    """`{id, time, root, path, action, source: {surface, sessionId, taskId, message}, summary}`;
    root_name is how the surface names the change's root (global, project or workspace)."""
    return {
        "id": change.id,
        "time": change.time,
        "root": root_name,
        "path": change.path,
        "action": change.action,
        "source": change.source.as_json(),
        "summary": summary(change, journal),
        **({"undoes": change.undoes} if change.undoes else {}),
    }
