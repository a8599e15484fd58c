"""run_command: a shell command in the client's terminal when it offers one, else a local
process group; in the foreground for up to timeout_seconds, then handed to the pool."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from acp_memory.paths import resolves_inside
from acp_memory.tasks.admission import PoolRefused, PoolSettings
from acp_memory.tasks.log import TaskLog, clean_output, clip, read_budget
from acp_memory.tasks.pool import TaskPool
from acp_memory.tasks.process import CommandProcess, start_process
from acp_memory.tasks.records import format_seconds
from acp_memory.tools.base import (
    PermissionRequest,
    TerminalView,
    ToolContext,
    ToolError,
    ToolKind,
    ToolResult,
)

FOREGROUND_TIMEOUT_SECONDS = 30.0
# The limits (log size, wait, kill grace) a command follows where the session has no pool.
_NO_POOL = PoolSettings()


class RunCommand:
    name = "run_command"
    description = (
        "Run a shell command line in the working directory or a folder under it; stdout "
        "and stderr are returned together with the exit code. A command still running after "
        "timeout_seconds (default 30) goes on as a background task whose id the result gives; "
        "with background: true it starts as one at once (timeout_seconds is then its hard "
        "limit). Follow background tasks with background_output, background_wait and "
        "background_stop."
    )
    kind: ToolKind = "execute"
    read_only = False
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "description": "the command line"},
            "cwd": {
                "type": "string",
                "description": "folder to run in, relative to the working directory",
            },
            "timeout_seconds": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": (
                    "foreground: how long to wait before the command goes to the background "
                    "(default 30); background: the task's hard limit"
                ),
            },
            "background": {
                "type": "boolean",
                "description": "start as a background task and return at once",
            },
            "expected_seconds": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "how long you expect it to take; sets a background hard limit",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        command = " ".join(str(args.get("command", "")).split())
        return f"Run {command[:77] + '…' if len(command) > 78 else command}"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        command = str(args["command"])
        if not command.strip():
            raise ToolError("the command is empty")
        cwd = await _folder(ctx, args.get("cwd"))
        if ctx.permissions is not None:
            await ctx.permissions.ensure(
                ctx, PermissionRequest("command", command, self.title(args))
            )
        pool: TaskPool | None = ctx.tasks
        if args.get("background"):
            return await _background(args, ctx, pool, command, cwd)
        return await _foreground(args, ctx, pool, command, cwd)


async def _folder(ctx: ToolContext, rel: Any) -> Path:
    root = ctx.cwd.resolve()
    if not rel:
        return root
    target = root / str(rel)
    if not resolves_inside(target, root):
        raise ToolError(f"cwd {rel!r} is outside the working directory {root}")
    if not await anyio.Path(target).is_dir():
        raise ToolError(f"cwd {rel!r} is not a folder under {root}")
    return target.resolve()


def _editor(ctx: ToolContext) -> Any:
    editor = ctx.editor
    return editor if editor is not None and editor.can_run_terminals else None


async def _background(
    args: Mapping[str, Any], ctx: ToolContext, pool: TaskPool | None, command: str, cwd: Path
) -> ToolResult:
    if pool is None:
        raise ToolError("background commands are not available here: this session has no pool")
    try:
        task = await pool.start_command(
            command,
            cwd,
            timeout_seconds=args.get("timeout_seconds"),
            expected_seconds=args.get("expected_seconds"),
            editor=_editor(ctx),
        )
    except PoolRefused as exc:
        raise ToolError(f"the command was not started: {exc}") from None
    limit = format_seconds(task.record.timeout_seconds or 0)
    content = await _show_terminal(ctx, task.process)
    return ToolResult(
        f"Started {task.id} in the background (hard limit {limit}). Follow it with "
        f"background_output, background_wait or background_stop (task_id {task.id}); "
        "its end is announced in your next step.",
        content=content,
    )


async def _foreground(
    args: Mapping[str, Any], ctx: ToolContext, pool: TaskPool | None, command: str, cwd: Path
) -> ToolResult:
    settings = pool.settings if pool is not None else _NO_POOL
    wait_s = min(
        float(args.get("timeout_seconds") or FOREGROUND_TIMEOUT_SECONDS),
        settings.max_timeout_seconds,
    )
    log = TaskLog(settings.log_bytes)
    if pool is not None:
        return await _wait_or_adopt(ctx, pool, command, cwd, log, wait_s)
    # No pool (nothing outlives the call): the command is followed in the call's own group.
    async with anyio.create_task_group() as tg:
        try:
            proc = await start_process(
                tg, command, cwd, log, grace=settings.kill_grace_seconds, editor=_editor(ctx),
                session_id=ctx.session_id,
            )
        except OSError as exc:
            raise ToolError(f"cannot start the command: {exc.strerror or exc}") from None
        try:
            content = await _show_terminal(ctx, proc)
            ended = await _waited(proc, wait_s)
        finally:
            await _kill(proc)  # a cancelled call, or one past its wait: nothing may outlive it
    if ended:
        return await _finished(proc, ctx.output_limit, content)
    output = await _output(proc, ctx.output_limit, "(no output)")
    return ToolResult(
        f"Error: the command was still running after {format_seconds(wait_s)} and was "
        f"killed (no background pool here).\n{output}",
        is_error=True,
        content=content,
    )


async def _wait_or_adopt(
    ctx: ToolContext, pool: TaskPool, command: str, cwd: Path, log: TaskLog, wait_s: float
) -> ToolResult:
    limit = ctx.output_limit
    try:
        proc = await pool.open_process(command, cwd, log, editor=_editor(ctx))
    except OSError as exc:
        raise ToolError(f"cannot start the command: {exc.strerror or exc}") from None
    adopted = False
    try:
        content = await _show_terminal(ctx, proc)
        if await _waited(proc, wait_s):
            return await _finished(proc, limit, content)
        try:
            task = await pool.adopt(proc, command=command, cwd=cwd)
        except PoolRefused as exc:
            await _kill(proc)
            output = await _output(proc, limit, "(no output)")
            return ToolResult(
                f"Error: the command was still running after {format_seconds(wait_s)} and "
                f"was killed with its process group: the background pool refused it ({exc})."
                f"\n{output}",
                is_error=True,
                content=content,
            )
        adopted = True
    finally:
        if not adopted:  # cancelled, or failed on the way: the command goes with the call
            await _kill(proc)
    hard = format_seconds(task.record.timeout_seconds or 0)
    output = await _output(proc, limit, "(no output yet)")
    return ToolResult(
        f"The command is still running after {format_seconds(wait_s)}: it goes on in the "
        f"background as {task.id} (hard limit {hard}). Follow it with background_output, "
        f"background_wait or background_stop (task_id {task.id}); its end is announced in "
        f"your next step.\nOutput so far:\n{output}",
        content=content,
    )


async def _waited(proc: CommandProcess, seconds: float) -> bool:
    """Whether the command ended within `seconds`."""
    with anyio.move_on_after(seconds):
        await proc.done.wait()
    return proc.done.is_set()


async def _kill(proc: CommandProcess) -> None:
    with anyio.CancelScope(shield=True):
        await proc.kill()


async def _show_terminal(ctx: ToolContext, proc: CommandProcess | None) -> list[Any]:
    if proc is None or proc.terminal_id is None:
        return []
    view = TerminalView(proc.terminal_id)
    if ctx.progress is not None:
        await ctx.progress([view])
    return [view]


async def _output(proc: CommandProcess, limit: int, empty: str) -> str:
    """The command's output as the model reads it, within `limit` characters."""
    budget = read_budget(limit)
    raw = await proc.live_output()
    if raw is None:
        raw = await proc.log.read_tail(budget)
    text = clean_output(raw.decode("utf-8", errors="replace")).strip("\n")
    if proc.log.total > len(raw) and proc.terminal_id is None:
        text = "[earlier output not shown]\n" + text.partition("\n")[2]
    if not text:
        return empty
    text = clip(text, limit)
    if proc.log.truncated:
        text += "\n[the command wrote more than its log keeps: the middle was cut]"
    return text


async def _finished(proc: CommandProcess, limit: int, content: list[Any]) -> ToolResult:
    body = await _output(proc, limit, "(no output)")
    if proc.error is not None:
        return ToolResult(f"{body}\n[error: {proc.error}]", is_error=True, content=content)
    ended = proc.exit
    if ended is None:
        return ToolResult(f"{body}\n[ended with no exit status]", is_error=True, content=content)
    status = ended.describe()
    if ended.exit_code == 127:
        status += ": command not found"
    return ToolResult(f"{body}\n[{status}]", is_error=ended.exit_code != 0, content=content)
