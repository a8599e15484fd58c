"""session/update payloads: live turn events and the replay of a stored transcript."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ContentToolCallContent,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)
from pydantic import BaseModel

from acp_memory.acp.wire import dump
from acp_memory.engine.events import (
    AgentText,
    AgentThought,
    ToolCallFinished,
    ToolCallStarted,
    TurnEvent,
)
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.tools.registry import parse_arguments


def _text(text: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=text)


def event_update(event: TurnEvent) -> dict[str, Any]:
    """The `update` object for one turn event."""
    update: BaseModel
    if isinstance(event, AgentText):
        update = AgentMessageChunk(session_update="agent_message_chunk", content=_text(event.text))
    elif isinstance(event, AgentThought):
        update = AgentThoughtChunk(session_update="agent_thought_chunk", content=_text(event.text))
    elif isinstance(event, ToolCallStarted):
        update = ToolCallStart(
            session_update="tool_call",
            tool_call_id=event.call_id,
            title=event.title,
            kind=event.kind,  # type: ignore[arg-type]
            status="in_progress",
            raw_input=event.raw_input,
            locations=[ToolCallLocation(path=p) for p in event.locations] or None,
        )
    else:
        update = _finished(event)
    return dump(update)


def _finished(event: ToolCallFinished) -> ToolCallProgress:
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=event.call_id,
        status=event.status,
        content=[ContentToolCallContent(type="content", content=_text(event.output))],
        locations=[ToolCallLocation(path=p) for p in event.locations] or None,
    )


def replay_updates(messages: list[TranscriptMessage]) -> Iterator[dict[str, Any]]:
    """The updates that rebuild a transcript in the editor, in order."""
    for m in messages:
        if m.role == "user":
            yield dump(
                UserMessageChunk(session_update="user_message_chunk", content=_text(m.content))
            )
        elif m.role == "assistant":
            if m.reasoning:
                yield event_update(AgentThought(m.reasoning))
            if m.content:
                yield event_update(AgentText(m.content))
            for call in m.tool_calls or ():
                args = parse_arguments(call.arguments)
                yield event_update(
                    ToolCallStarted(
                        call.id,
                        call.title or call.name,
                        call.kind or "other",
                        args if isinstance(args, dict) else call.arguments,
                    )
                )
        elif m.tool_call_id:
            yield event_update(
                ToolCallFinished(m.tool_call_id, "failed" if m.is_error else "completed", m.content)
            )
