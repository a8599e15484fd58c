"""/memory log, undo, pending, approve and reject: the notes' history and the changes held
for approval, as this session sees them. The store's changes come from the `command` surface."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from acp_memory.commands.base import CommandCall
from acp_memory.memory.history.journal import ChangeSource, JournalError
from acp_memory.memory.history.pending import approve, reject
from acp_memory.memory.history.summary import change_line, counted, undone_line
from acp_memory.memory.history.undo import ChangedSince, journal_of, undo_changes
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.runtime.memory_service import is_memory_run
from acp_memory.sessions.store import Session

LOG_LIMIT = 10  # the changes /memory log shows
SUBCOMMANDS = "log, undo, pending, approve [ID|all], reject [ID|all]"
USAGE = (f"Usage: /memory [{SUBCOMMANDS}]: alone, the last memory run and the notes; log, the "
         "recent changes of the notes; undo, the changes of this session's last memory run; "
         "pending, approve and reject, the changes held for approval in this session (all of "
         "them when no ID is given).")


async def memory_subcommand(call: CommandCall) -> str:
    """The reply of `/memory WORD [ID|all]`."""
    word, _, rest = call.argument.partition(" ")
    rest = rest.strip()
    store = call.runner.memory.store_for(call.session.record.cwd,
                                         ChangeSource("command", call.session.id))
    with store:
        if word == "log" and not rest:
            return await _on_disk(_log, store)
        if word == "undo" and not rest:
            return await _undo(call, store)
        if word == "pending" and not rest:
            return await _on_disk(_pending, store, call.session)
        if word in ("approve", "reject"):
            return await _on_disk(_decide, store, call.session, word, rest or "all")
    return USAGE


async def _on_disk(work: Callable[..., str], *args: object) -> str:
    """Run work in a worker thread (the notes and the journal are disk); a refusal or a
    journal that cannot be read is the reply."""
    try:
        return await anyio.to_thread.run_sync(work, *args)
    except (NoteError, JournalError) as exc:
        return str(exc)


def _log(store: MemoryStore) -> str:
    journal = journal_of(store)
    store.settle()  # a writer that died mid-change: its change shows as it ended
    changes = journal.changes(store.roots.dirs(), limit=LOG_LIMIT)
    if not changes:
        scopes = " or ".join(store.roots.scopes())
        return f"No changes of the {scopes} notes in the memory history yet."
    lines = ["Recent changes of the notes, newest first (`acp-memory notes log` shows more):"]
    return "\n".join([*lines, *(f"- {change_line(c, journal)}" for c in changes)])


async def _undo(call: CommandCall, store: MemoryStore) -> str:
    """Undo the changes of this session's last memory run, all in one step."""
    pool = call.runner.pool_for(call.session)
    runs = [r for r in await pool.records(include_system=True) if is_memory_run(r)]
    if not runs:
        return "No memory run in this session yet: nothing to undo."
    last = runs[-1]
    if not last.finished:
        return f"The last memory run, {last.id}, is still {last.status}; undo it once it ends."
    return await _on_disk(_undo_run, store, call.session, last.id)


def _undo_run(store: MemoryStore, session: Session, task_id: str) -> str:
    journal = journal_of(store)
    changes = journal.changes(store.roots.dirs(), limit=0, task_id=task_id, session_id=session.id)
    if not changes:
        return f"The last memory run, {task_id}, changed no notes: nothing to undo."
    undone = {c.undoes for change in changes for c in journal.later(change)}
    if all(change.id in undone for change in changes):
        return f"The changes of the last memory run, {task_id}, are undone already."
    try:
        done = undo_changes(store, changes)
    except ChangedSince as exc:
        return (f"Nothing was undone of memory run {task_id}: {exc}. `acp-memory notes undo "
                "--force CHANGE_ID` overrides it, one change at a time.")
    except NoteError as exc:
        return f"Nothing was undone of memory run {task_id}: {exc}"
    lines = [f"Undid the {counted(len(done), 'change')} of memory run {task_id}:"]
    return "\n".join([*lines, *(f"- {undone_line(u)}" for u in done)])


def _pending(store: MemoryStore, session: Session) -> str:
    journal = journal_of(store)
    held = journal.held(session_id=session.id)
    if not held:
        return "No changes of this session are waiting for approval."
    lines = [f"{counted(len(held), 'change')} waiting for approval (/memory approve ID|all, "
             "/memory reject ID|all):"]
    return "\n".join([*lines, *(f"- {change_line(h, journal)}" for h in held)])


def _decide(store: MemoryStore, session: Session, word: str, wanted: str) -> str:
    """Approve or reject one of this session's held changes, or all of them."""
    journal = journal_of(store)
    held = journal.held(session_id=session.id)
    ids = [h.id for h in held] if wanted == "all" else [wanted]
    if not ids:
        return "No changes of this session are waiting for approval."
    if wanted != "all" and wanted not in {h.id for h in held}:
        return (f"No pending change {wanted!r} in this session (approved, rejected, or past "
                "memory.pending_days); see /memory pending.")
    decide, done = (approve, "approved") if word == "approve" else (reject, "rejected")
    lines: list[str] = []
    for pending_id in ids:
        try:
            one = decide(store, pending_id)
        except NoteError as exc:
            lines.append(f"- not {done} {pending_id}: {exc}")
            continue
        lines.append(f"- {done} {one.id}: {one.action} {one.scope}:{one.path}")
    return "\n".join(lines)
