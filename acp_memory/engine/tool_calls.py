"""A step's tool calls run in order: each reported to the editor, its result recorded, and a
result recorded for every call that was cancelled or never ran."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

import anyio

from acp_memory.engine.events import (
    Emit,
    PlanUpdated,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
)
from acp_memory.hooks.events import SessionHooks
from acp_memory.llm.types import ToolCall
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import Session
from acp_memory.tools.base import (
    Diff,
    ImageView,
    LinkView,
    ToolContent,
    ToolContext,
    ToolResult,
    TurnCancelled,
)
from acp_memory.tools.registry import PreparedCall, ToolSet

CANCELLED_RESULT = "Error: the tool call was cancelled by the user."
# The result of a call the turn never started (the editor never saw it either).
NOT_RUN_RESULT = "Error: the tool call was not run; the turn stopped before it started."


async def run_tool_calls(
    session: Session,
    calls: list[PreparedCall],
    emit: Emit,
    tools: ToolSet,
    base: ToolContext,
    hooks: SessionHooks | None = None,
) -> bool:
    """Run the calls in order; False when the user cancelled the turn from inside one."""
    pending = list(calls)
    running: str | None = None  # the call the editor shows in progress
    cancelled = False
    # A bundle that skips the syncs (a memory run's child) with no hook that could read
    # its transcript meanwhile: the step's results are written in one append, not one
    # each (every append rewrites a file and swaps two names).
    held: list[TranscriptMessage] | None = (
        [] if not session.durable and hooks is None else None
    )
    try:
        while pending:
            prepared = pending[0]
            call_id = running = prepared.call.id

            async def progress(content: Sequence[ToolContent], call_id: str = call_id) -> None:
                await emit(ToolCallProgress(call_id, list(content)))

            ctx = replace(base, call_id=call_id, progress=progress)
            await emit(
                ToolCallStarted(
                    call_id,
                    prepared.title,
                    prepared.kind,
                    prepared.raw_input,
                    prepared.locations(ctx),
                )
            )
            name, args = prepared.call.name, prepared.raw_input
            blocked = await hooks.pre_tool(name, args) if hooks is not None else None
            try:
                if blocked is not None:
                    text = f"Error: {blocked}"
                    result = ToolResult(text, is_error=True)
                else:
                    result = await tools.run(prepared, ctx)
            except TurnCancelled as exc:
                cancelled = True
                result = ToolResult(f"Error: {exc or CANCELLED_RESULT}", is_error=True)
            message = TranscriptMessage(
                role="tool",
                content=result.text,
                tool_call_id=call_id,
                name=prepared.call.name,
                is_error=result.is_error or None,
                locations=result.locations or None,
                content_extra=[_content_dump(c) for c in result.content] or None,
                plan=result.plan,
            )
            if held is None:
                await session.append(message)
            else:
                held.append(message)
            pending.pop(0)
            status: Literal["completed", "failed"] = (
                "failed" if result.is_error else "completed"
            )
            running = None
            await emit(
                ToolCallFinished(
                    call_id, status, result.text, result.locations, list(result.content)
                )
            )
            if result.plan is not None:
                await emit(PlanUpdated(result.plan))
            if cancelled:
                break
            if hooks is not None and blocked is None:
                await hooks.post_tool(name, args, result.text, result.is_error)
    finally:
        # Providers refuse a history where a tool call has no result.
        ended = [
            cancelled_result(p.call, CANCELLED_RESULT if p.call.id == running else NOT_RUN_RESULT)
            for p in pending
        ]
        await session.append_all([*(held or ()), *ended])
        if running is not None:
            # The editor would show the interrupted call in progress for ever.
            with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                await emit(ToolCallFinished(running, "failed", CANCELLED_RESULT))
    return not cancelled


def cancelled_result(call: ToolCall, text: str = CANCELLED_RESULT) -> TranscriptMessage:
    """The error result recorded for a call that never ran, or never finished."""
    return TranscriptMessage(
        role="tool", content=text, tool_call_id=call.id, name=call.name, is_error=True
    )


def _content_dump(c: ToolContent) -> dict[str, Any]:
    """Tool content as the transcript keeps it, for a faithful replay."""
    if isinstance(c, Diff):
        return {"type": "diff", "path": c.path, "oldText": c.old, "newText": c.new}
    if isinstance(c, ImageView):
        return {"type": "image", "data": c.data, "mimeType": c.mime_type}
    if isinstance(c, LinkView):
        return {"type": "resource_link", "uri": c.uri, "name": c.name, "mimeType": c.mime_type}
    return {"type": "terminal", "terminalId": c.terminal_id}
