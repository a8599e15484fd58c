"""/memory log, undo, pending, approve and reject: the notes' history and the changes held
for approval, as this session sees them. The store's changes come from the `command` surface."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from acp_memory.commands.base import CommandCall
from acp_memory.memory.history.journal import JournalError
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.history.service import History
from acp_memory.memory.history.summary import change_line, counted, undone_line
from acp_memory.memory.shared.key import shared_key_of, shared_label
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.runtime.reflection import is_reflection_run
from acp_memory.runtime.run_retention import is_memory_run
from acp_memory.runtime.tidy_run import is_tidy_run, tidy_in_session
from acp_memory.sessions.store import Session

LOG_LIMIT = 10  # the changes /memory log shows
FORCE_HINT = "/memory undo --force undoes anyway"
SUBCOMMANDS = ("log, undo [--force], pending, approve [ID|all], reject [ID|all], "
               "tidy [global|project]")
USAGE = (f"Usage: /memory [{SUBCOMMANDS}]: alone, the last memory run and the notes; log, the "
         "recent changes of the notes; undo, the changes of this session's last memory run "
         "(all or none; --force over later changes); pending, approve and reject, the changes "
         "held for approval in this session (all of them when no ID is given); tidy, a tidy "
         "run over a root (default project), its proposals held for approve or reject.")


async def memory_subcommand(call: CommandCall) -> str:
    """The reply of `/memory WORD [ID|all|--force]`."""
    word, _, rest = call.argument.partition(" ")
    rest = rest.strip()
    store = call.runner.memory.store_for(call.session.record.cwd,
                                         ChangeSource("command", call.session.id))
    with store:
        if word == "log" and not rest:
            return await _on_disk(_log, store)
        if word == "undo" and rest in ("", "--force"):
            return await _undo(call, store, force=rest == "--force")
        if word == "pending" and not rest:
            return await _on_disk(_pending, store, call.session)
        if word in ("approve", "reject"):
            return await _on_disk(_decide, store, call.session, word, rest or "all")
    if word == "tidy" and rest.rstrip(":") in ("", "global", "project"):
        return await _tidy(call, rest.rstrip(":") or "project")
    return USAGE


async def _tidy(call: CommandCall, scope: str) -> str:
    """`/memory tidy [SCOPE]`: a tidy run (it calls the memory model) as a memory run of the
    session, its proposals held as this session's (`/memory approve|reject`)."""
    try:
        lines = await tidy_in_session(call.runner.memory, call.session, scope,
                                      call.notify_memory)
    except (NoteError, JournalError) as exc:  # the candidates could not be read
        return f"The tidy run of {scope}: failed: {exc}"
    return "\n".join(lines)


async def _on_disk(work: Callable[..., str], *args: object) -> str:
    """Run work in a worker thread (the notes and the journal are disk); a refusal or a
    journal that cannot be read is the reply."""
    try:
        return await anyio.to_thread.run_sync(work, *args)
    except (NoteError, JournalError) as exc:
        return str(exc)


def _history(store: MemoryStore) -> History:
    return History.of_session(store, FORCE_HINT)


def _log(store: MemoryStore) -> str:
    history = _history(store)
    changes = history.changes(limit=LOG_LIMIT)
    if not changes:
        scopes = " or ".join(shared_label(scope, shared_key_of(store.roots, scope))
                             for scope in store.roots.scopes())
        return f"No changes of the {scopes} notes in the memory history yet."
    lines = ["Recent changes of the notes, newest first (`acp-memory notes log` shows more):"]
    return "\n".join([*lines, *(f"- {change_line(c, history.journal)}" for c in changes)])


async def _undo(call: CommandCall, store: MemoryStore, force: bool) -> str:
    """Undo the changes of this session's last memory run, all in one step."""
    pool = call.runner.pool_for(call.session)
    # A turn's run: a reflection's changes are undone by id (`notes undo`), and a tidy run
    # made none (its proposals are held).
    runs = [r for r in await pool.records(include_system=True)
            if is_memory_run(r) and not is_reflection_run(r) and not is_tidy_run(r)]
    if not runs:
        return "No memory run in this session yet: nothing to undo."
    last = runs[-1]
    if not last.finished:
        return f"The last memory run, {last.id}, is still {last.status}; undo it once it ends."
    return await _on_disk(_undo_run, store, call.session, last.id, force)


def _undo_run(store: MemoryStore, session: Session, task_id: str, force: bool) -> str:
    run = _history(store).undo_run(task_id, session.id, force=force)
    if not run.changes:
        return f"The last memory run, {task_id}, changed no notes: nothing to undo."
    if not run.undone:
        return f"The changes of the last memory run, {task_id}, are undone already."
    lines = [f"Undid the {counted(len(run.undone), 'change')} of memory run {task_id}:"]
    return "\n".join([*lines, *(f"- {undone_line(u)}" for u in run.undone)])


def _pending(store: MemoryStore, session: Session) -> str:
    history = _history(store)
    held = history.held(session.id)
    if not held:
        return "No changes of this session are waiting for approval."
    lines = [f"{counted(len(held), 'change')} waiting for approval (/memory approve ID|all, "
             "/memory reject ID|all):"]
    return "\n".join([*lines, *(f"- {change_line(h, history.journal)}" for h in held)])


def _decide(store: MemoryStore, session: Session, word: str, wanted: str) -> str:
    """Approve or reject one of this session's held changes, or all of them."""
    decisions = _history(store).decide(word == "approve", wanted, session.id)
    if not decisions:
        return "No changes of this session are waiting for approval."
    done = "approved" if word == "approve" else "rejected"
    return "\n".join(
        f"- not {done} {d.held.id}: {d.refused}" if d.refused
        else f"- {done} {d.held.id}: {d.held.action} {d.held.scope}:{d.held.path}"
        for d in decisions)
