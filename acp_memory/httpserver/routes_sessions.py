"""/coddy/sessions: create, list, read, prompt, cancel and delete sessions, and each session's
events stream (server-sent events, one per session/update)."""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import APIRouter, Path, Query
from fastapi.responses import StreamingResponse

from acp_memory.httpserver.agent import HttpAgent
from acp_memory.httpserver.events import sse_frames
from acp_memory.httpserver.models import (
    CancelResult,
    NewSession,
    PromptBody,
    PromptResult,
    SessionDeleted,
    SessionInfo,
    SessionList,
    SessionMessages,
)
from acp_memory.sessions.model import SESSION_ID_RULE, SessionRecord

SessionId = Annotated[str, Path(alias="id", description=f"the session's id: {SESSION_ID_RULE}")]
NO_BUFFERING = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def session_info(record: SessionRecord, running: bool) -> SessionInfo:
    """What the API shows of a session.json."""
    return SessionInfo(
        id=record.id,
        cwd=record.cwd,
        mode=record.mode,
        selected_model_id=record.selected_model_id,
        title=record.title,
        created_at=record.created_at,
        updated_at=record.updated_at,
        read_only=bool(record.subagent_run),
        running=running,
        parent_session_id=record.parent_session_id,
        subagent_name=record.subagent_name,
        subagent_task_id=record.subagent_task_id,
    )


def session_routes(agent: HttpAgent) -> APIRouter:
    router = APIRouter(prefix="/coddy/sessions", tags=["sessions"])

    @router.post("", response_model_exclude_none=True)
    async def create_session(body: NewSession) -> SessionInfo:
        """Create a session in the folder `cwd`."""
        session = await agent.create(body.cwd, body.mode, body.model)
        return session_info(session.record, running=False)

    @router.get("", response_model_exclude_none=True)
    async def list_sessions(
        cwd: Annotated[str | None, Query(description="only the sessions of this folder")] = None,
    ) -> SessionList:
        """Top-level sessions, the most recently active first."""
        records = await anyio.to_thread.run_sync(lambda: agent.store.list(cwd=cwd))
        return SessionList(sessions=[session_info(r, agent.running_turn(r.id)) for r in records])

    @router.get("/{id}", response_model_exclude_none=True)
    async def get_session(session_id: SessionId) -> SessionInfo:
        """A session's record; a child session's id works too."""
        session = await agent.read(session_id)
        return session_info(session.record, agent.running_turn(session_id))

    @router.get("/{id}/messages", response_model_exclude_none=True)
    async def get_messages(session_id: SessionId) -> SessionMessages:
        """The transcript; a child session's (a memory run's) is read-only."""
        session = await agent.read(session_id)
        record = session.record
        return SessionMessages(
            session_id=session_id,
            read_only=bool(record.subagent_run),
            parent_session_id=record.parent_session_id,
            messages=[m.dump() for m in session.messages],
        )

    @router.post("/{id}/prompt")
    async def prompt(session_id: SessionId, body: PromptBody) -> PromptResult:
        """Run one turn; answers with its stop reason when it ends, its updates going out on
        the events stream. 409 while another turn of the session runs."""
        session = await agent.writable(session_id)
        with agent.claimed(session) as scope:
            stop = await agent.run_turn(session, body.text, scope)
        return PromptResult(session_id=session_id, stop_reason=stop)

    @router.post("/{id}/cancel")
    async def cancel(session_id: SessionId) -> CancelResult:
        """Cancel the running turn, if any (its prompt answers `cancelled`)."""
        await agent.read(session_id)  # 404 for a session that does not exist
        return CancelResult(session_id=session_id, cancelled=agent.cancel(session_id))

    @router.delete("/{id}")
    async def delete_session(session_id: SessionId) -> SessionDeleted:
        """Delete the session's bundle, with its memory runs' child sessions."""
        await agent.delete(session_id)
        return SessionDeleted(session_id=session_id)

    @router.get(
        "/{id}/events",
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}, "description": "SSE"}},
    )
    async def events(session_id: SessionId) -> StreamingResponse:
        """Server-sent events: one per session/update from now on, named after its
        `sessionUpdate` (`memory_run` among them), the update as JSON data. It ends when the
        session is deleted or the server stops."""
        await agent.read(session_id)
        # Subscribed before the answer starts: an update sent once the client has the
        # headers is never missed.
        updates = agent.events.subscribe(session_id)
        return StreamingResponse(
            sse_frames(updates), media_type="text/event-stream", headers=NO_BUFFERING
        )

    return router
