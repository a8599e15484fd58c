"""/coddy/sessions/{id}/memory/history, /undo and /pending: the journal of the session's two
roots, an undo of one change, and the changes held for the user's approval.

The person using the API is the user: an undo or an approval here is theirs (journaled with
source `http`, or an approved change with the source that proposed it), never held.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Path, Query

from acp_memory.httpserver.agent import HttpAgent
from acp_memory.httpserver.models import (
    DecisionBody,
    MemoryChange,
    MemoryDecision,
    MemoryHistory,
    MemoryPending,
    MemoryUndo,
    Root,
    RootIn,
    UndoBody,
)
from acp_memory.httpserver.routes_memory import SCOPES, store_work
from acp_memory.httpserver.routes_sessions import SessionId
from acp_memory.memory.history.records import Change, Held
from acp_memory.memory.history.service import History
from acp_memory.memory.history.summary import change_json
from acp_memory.memory.shared.key import shared_key_of
from acp_memory.memory.store import MemoryStore

ROOTS = {scope: root for root, scope in SCOPES.items()}  # the store's scope -> the API's root
FORCE_HINT = "`force: true` undoes anyway"

PendingId = Annotated[str, Path(description="pnd_ and 12 hex digits")]


def history_routes(agent: HttpAgent) -> APIRouter:
    router = APIRouter(prefix="/coddy/sessions/{id}/memory", tags=["memory history"])

    in_store = partial(store_work, agent)

    @router.get("/history")
    async def history(
        session_id: SessionId,
        root: Annotated[RootIn | None, Query(description="one root; both without it")] = None,
        path: Annotated[str, Query(description="a note or folder: its changes, those under "
                                   "it and those of the folders holding it")] = "",
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    ) -> MemoryHistory:
        """The journaled changes of the session's roots, newest first, as `notes log --json`
        prints them."""
        return await in_store(session_id, partial(_history, root=root, path=path, limit=limit))

    @router.post("/undo")
    async def undo_change(session_id: SessionId, body: UndoBody) -> MemoryUndo:
        """Put a path back as it was before a change (a deleted note or folder comes back);
        409 naming the later change or the hand edit since, unless `force`."""
        return await in_store(session_id, partial(_undo, body=body))

    @router.get("/pending")
    async def pending(
        session_id: SessionId,
        all_sessions: Annotated[bool, Query(alias="all", description="whoever held them")] = False,
    ) -> MemoryPending:
        """The changes held for approval in this session's roots: this session's memory runs'
        and memory tool's, or with `all`, whoever held them."""
        owner = None if all_sessions else session_id
        return await in_store(session_id, partial(_pending, session_id=owner))

    @router.post("/pending/{pending_id}")
    async def decide(
        session_id: SessionId, pending_id: PendingId, body: DecisionBody
    ) -> MemoryDecision:
        """Approve (make the change as it was proposed; 409 when the note changed since) or
        reject (drop it) a held change of this session's roots (404 otherwise)."""
        return await in_store(session_id, partial(_decide, pending_id=pending_id, body=body))

    return router


# The blocking parts, run in a worker thread.


def _history(store: MemoryStore, root: Root | None, path: str, limit: int) -> MemoryHistory:
    history = History.of_session(store, FORCE_HINT)
    scopes = [SCOPES[root]] if root is not None else list(store.roots.scopes())
    locs = [store.locate(f"{scope}:{path}") for scope in scopes]
    changes = history.changes([loc.root for loc in locs], path=locs[0].rel or None, limit=limit)
    return MemoryHistory(changes=[_change(c, history) for c in changes])


def _undo(store: MemoryStore, body: UndoBody) -> MemoryUndo:
    history = History.of_session(store, FORCE_HINT)
    done = history.undo(body.change_id, force=body.force)
    root = ROOTS[done.change.scope]
    return MemoryUndo(
        change_id=done.undo_id,
        undone=_change(done.change, history),
        root=root,  # type: ignore[arg-type]
        shared=shared_key_of(store.roots, done.change.scope, done.change.root),
        path=done.change.path,
        restored=done.restored,
        redacted=done.redacted,
    )


def _pending(store: MemoryStore, session_id: str | None) -> MemoryPending:
    history = History.of_session(store, FORCE_HINT)
    return MemoryPending(pending=[_change(h, history) for h in history.held(session_id)])


def _decide(store: MemoryStore, pending_id: str, body: DecisionBody) -> MemoryDecision:
    history = History.of_session(store, FORCE_HINT)
    # Shown as it was proposed, before its content may be dropped with it.
    shown = _change(history.held_change(pending_id), history)
    if body.approve:
        history.approve(pending_id)
    else:
        history.reject(pending_id)
    return MemoryDecision(approved=body.approve, pending=shown)


def _change(change: Change | Held, history: History) -> MemoryChange:
    shared = shared_key_of(history.store.roots, change.scope, change.root)
    return MemoryChange.model_validate(
        change_json(change, history.journal, ROOTS[change.scope], shared))
