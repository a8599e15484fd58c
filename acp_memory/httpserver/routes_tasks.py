"""/coddy/sessions/{id}/background-tasks: the session's task records, system tasks (memory
runs) included, a task's log tail, and stopping any running task.

The person may stop a memory run here; only the model's tools refuse system tasks.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from acp_memory.httpserver.agent import HttpAgent
from acp_memory.httpserver.errors import ApiError
from acp_memory.httpserver.models import TaskDetail, TaskList
from acp_memory.httpserver.routes_sessions import SessionId
from acp_memory.sessions.store import Session
from acp_memory.tasks.pool import TaskPool, UnknownTask

TaskId = Annotated[str, Path(alias="taskId", description="bg_<n>")]
STOP_REASON = "stopped by the user (HTTP API)"


def task_routes(agent: HttpAgent) -> APIRouter:
    router = APIRouter(prefix="/coddy/sessions/{id}/background-tasks", tags=["background tasks"])

    async def pool_of(session_id: str) -> tuple[Session, TaskPool]:
        session = await agent.read(session_id)
        return session, agent.pool(session)

    @router.get("")
    async def list_tasks(session_id: SessionId) -> TaskList:
        """Every task of the session, oldest first, memory runs (`system: true`) included."""
        _, pool = await pool_of(session_id)
        return TaskList(tasks=[r.dump() for r in await pool.records(include_system=True)])

    @router.get("/{taskId}", response_model_exclude_none=True)
    async def get_task(
        session_id: SessionId,
        task_id: TaskId,
        tail: Annotated[int, Query(ge=0, le=10_000, description="log lines; 0 for none")] = 100,
    ) -> TaskDetail:
        """A task's record and the last `tail` lines of its output log."""
        session, pool = await pool_of(session_id)
        try:
            record = await pool.record(task_id)
            output = await pool.output(task_id, tail_lines=tail) if tail else None
        except UnknownTask:
            raise ApiError(404, f"session {session.id} has no background task {task_id}") from None
        return TaskDetail(task=record.dump(), tail=output)

    @router.post("/{taskId}/stop")
    async def stop_task(session_id: SessionId, task_id: TaskId) -> TaskDetail:
        """Stop a running task, a memory run included; it is recorded `stopped`. A task that
        already ended is left as it is."""
        session, pool = await pool_of(session_id)
        try:
            record = await pool.stop(task_id, STOP_REASON)
        except UnknownTask:
            raise ApiError(404, f"session {session.id} has no background task {task_id}") from None
        return TaskDetail(task=record.dump())

    return router
