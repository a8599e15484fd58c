"""A journaled change as people read it: the one-line summary of what it did, and the JSON
object `notes log --json` prints and the HTTP history answers."""

from __future__ import annotations

import difflib
import json
from typing import Any

from acp_memory.memory.history.journal import Journal, JournalError
from acp_memory.memory.history.journals import Journals
from acp_memory.memory.history.records import Change, ChangeSource, Held
from acp_memory.memory.history.states import DIR, NOTE, notes_in
from acp_memory.memory.history.undo import Undone


def summary(change: Change | Held, journal: Journal | Journals) -> str:
    """`+3 -1 lines`, `new note, 120 bytes`, `deleted, 120 bytes`, `folder with 3 notes`..."""
    try:
        return _summary(change, journal)
    except JournalError:
        return "(content no longer kept)"


def _summary(change: Change | Held, journal: Journal | Journals) -> str:
    before, after = change.before, change.after
    prefix = f"undid {change.undoes}: " if change.action == "undo" else ""
    if change.action == "purge":
        return "history purged (every earlier record of it dropped)"
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


def counted(n: int, what: str) -> str:
    """`1 note`, `3 notes`: the counts of the history's lines on every surface."""
    return f"{n} {what}" + ("" if n == 1 else "s")


def _notes(count: int) -> str:
    return counted(count, "note")


def change_json(
    change: Change | Held, journal: Journal | Journals, root_name: str,
    shared: str | None = None,
) -> dict[str, Any]:
    """`{id, time, root, path, action, source: {surface, sessionId, taskId, message}, summary}`
    (and `undoes` for an undo, `shared` the project key of a shared root's change); root_name
    is how the surface names the change's root (global, project or workspace). A change held
    for approval (`notes pending --json`, the HTTP API) is shown the same way, its id a `pnd_`
    one."""
    return {
        "id": change.id,
        "time": change.time,
        "root": root_name,
        "path": change.path,
        "action": change.action,
        "source": change.source.as_json(),
        "summary": summary(change, journal),
        **({"undoes": change.undoes} if change.undoes else {}),
        **({"shared": shared} if shared else {}),
        **_held_json(change),
    }


def _held_json(change: Change | Held) -> dict[str, Any]:
    """A held change's reason and the other paths it makes with its own (a merge's)."""
    if not isinstance(change, Held):
        return {}
    return {**({"reason": change.reason} if change.reason else {}),
            **({"also": [{"path": p.path, "action": p.action} for p in change.parts]}
               if change.parts else {})}


def change_line(change: Change | Held, journal: Journal | Journals) -> str:
    """One line of `notes log`, `notes pending` and `/memory log`: id, time, action,
    scope:path, the summary, and where the change came from."""
    folder = any(s and s.startswith(DIR) for s in (change.before, change.after))
    shown = f"{change.scope}:{change.path}" + ("/" if folder and change.path else "")
    when = change.time[:19].replace("T", " ")  # UTC to the second, as a person reads it
    line = (f"{change.id}  {when}  {change.action}  {shown}: {summary(change, journal)}; "
            f"by {source_text(change.source)}")
    if isinstance(change, Held):
        also = [f"{p.action} {change.scope}:{p.path}" for p in change.parts]
        line += "".join(f"; with {a}" for a in also)
        line += f"; why: {change.reason}" if change.reason else ""
    return line


def source_text(source: ChangeSource) -> str:
    """`memory_run (session sess_…, task bg_3): "remember that I use uv"`, after who on the
    team made it when the shared project root recorded that: `alice@laptop via memory_run …`."""
    known = [f"{what} {value}" for what, value in (("session", source.session_id),
                                                   ("task", source.task_id)) if value]
    text = source.surface + (f" ({', '.join(known)})" if known else "")
    who = "@".join(part for part in (source.user, source.host) if part)
    text = f"{who} via {text}" if who else text
    return text + (f": {json.dumps(source.message, ensure_ascii=False)}"
                   if source.message else "")


def undone_line(undone: Undone) -> str:
    """What an undo did: `undid chg_…: restored global:prefs.md; the undo is chg_…`
    (`global:prefs.md restored with 1 secret(s) redacted` when the history kept its text
    redacted: the words the README promises, whatever the count)."""
    count = f" ({_notes(undone.restored)})" if undone.display.endswith("/") else ""
    if not undone.change.before:
        did = f"removed {undone.display} (it did not exist before)"
    elif undone.redacted:
        did = f"{undone.display}{count} restored with {undone.redacted} secret(s) redacted"
    else:
        did = f"restored {undone.display}{count}"
    return f"undid {undone.change.id}: {did}" + (
        f"; the undo is {undone.undo_id}" if undone.undo_id else "")
