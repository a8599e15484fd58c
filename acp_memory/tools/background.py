"""The model's view of the session's background pool: list, output, wait, stop.

System tasks (the memory run) are the agent's own business: the list leaves them out and the
other three refuse their ids, so a model can neither read nor stall on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from acp_memory.tasks.pool import TaskPool, UnknownTask
from acp_memory.tasks.records import TaskRecord, format_seconds
from acp_memory.tools.base import ToolContext, ToolError, ToolKind, ToolResult

WAIT_DEFAULT_SECONDS = 60.0
WAIT_MAX_SECONDS = 300.0
TAIL_LINES_DEFAULT = 100

_TASK_ID = {"type": "string", "minLength": 1, "description": "the task id, e.g. bg_3"}


def _pool(ctx: ToolContext) -> TaskPool:
    if ctx.tasks is None:
        raise ToolError("background tasks are not available in this session")
    pool: TaskPool = ctx.tasks
    return pool


async def _model_task(ctx: ToolContext, task_id: str) -> tuple[TaskPool, TaskRecord]:
    """The pool and the record of a task the model may touch; ToolError otherwise."""
    pool = _pool(ctx)
    try:
        record = await pool.record(task_id)
    except UnknownTask as exc:
        raise ToolError(str(exc)) from None
    if record.system:
        raise ToolError(
            f"{task_id} is a system task ({record.label}); system tasks are not the model's "
            "to read or control"
        )
    return pool, record


def _status_line(record: TaskRecord) -> str:
    line = record.summary()
    if record.error and record.status != "succeeded":
        line += f"\n{record.status}: {record.error}"
    return line


class BackgroundList:
    name = "background_list"
    description = "List this session's background tasks: id, status, exit code, elapsed time."
    kind: ToolKind = "read"
    read_only = True
    parameters: Mapping[str, Any] = {
        "type": "object", "properties": {}, "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        return "List background tasks"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        records = await _pool(ctx).records()
        if not records:
            return ToolResult("No background tasks in this session.")
        return ToolResult("\n".join(r.summary() for r in records))


class BackgroundOutput:
    name = "background_output"
    description = (
        "The last lines of a background task's output (stdout and stderr together), "
        "with its status."
    )
    kind: ToolKind = "read"
    read_only = True
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "task_id": _TASK_ID,
            "tail_lines": {
                "type": "integer",
                "minimum": 1,
                "maximum": 10_000,
                "description": f"how many of the last lines (default {TAIL_LINES_DEFAULT})",
            },
        },
        "required": ["task_id"],
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Output of {args.get('task_id', '')}"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        pool, record = await _model_task(ctx, args["task_id"])
        lines = int(args.get("tail_lines") or TAIL_LINES_DEFAULT)
        text = await pool.output(record.id, lines, ctx.output_limit)
        if record.finished:
            pool.announcements.acknowledge(record.id)
        return ToolResult(f"{_status_line(record)}\n\n{text or '(no output)'}")


class BackgroundWait:
    name = "background_wait"
    description = (
        "Wait for a background task to finish, at most timeout_seconds (default 60, at most "
        "300); returns its status and the last lines of its output."
    )
    kind: ToolKind = "other"
    read_only = True
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "task_id": _TASK_ID,
            "timeout_seconds": {
                "type": "number",
                "minimum": 0,
                "maximum": WAIT_MAX_SECONDS,
                "description": f"how long to wait (default {WAIT_DEFAULT_SECONDS:.0f})",
            },
        },
        "required": ["task_id"],
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Wait for {args.get('task_id', '')}"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        pool, record = await _model_task(ctx, args["task_id"])
        seconds = args.get("timeout_seconds")
        seconds = WAIT_DEFAULT_SECONDS if seconds is None else min(seconds, WAIT_MAX_SECONDS)
        record = await pool.wait(record.id, seconds)
        text = await pool.output(record.id, TAIL_LINES_DEFAULT, ctx.output_limit)
        head = _status_line(record)
        if record.finished:
            pool.announcements.acknowledge(record.id)
        else:
            head = f"{record.id} is still running after waiting {format_seconds(seconds)}.\n{head}"
        return ToolResult(f"{head}\n\n{text or '(no output)'}")


class BackgroundStop:
    name = "background_stop"
    description = (
        "Stop a background task: its process group gets SIGTERM, then SIGKILL after a grace."
    )
    kind: ToolKind = "execute"
    read_only = False
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"task_id": _TASK_ID},
        "required": ["task_id"],
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Stop {args.get('task_id', '')}"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        pool, record = await _model_task(ctx, args["task_id"])
        if record.finished:
            return ToolResult(f"{record.id} had already ended.\n{_status_line(record)}")
        record = await pool.stop(record.id)
        pool.announcements.acknowledge(record.id)
        return ToolResult(_status_line(record))


BACKGROUND_TOOLS = (BackgroundList, BackgroundOutput, BackgroundWait, BackgroundStop)
