"""session/update payloads: live turn events and the replay of a stored transcript."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from acp_memory.acp.schema import text_content
from acp_memory.engine.events import (
    AgentText,
    AgentThought,
    ToolCallFinished,
    ToolCallStarted,
    TurnEvent,
)
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.tools.registry import parse_arguments


def _chunk(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": text_content(text)}


def _locations(paths: list[str]) -> dict[str, Any]:
    return {"locations": [{"path": p} for p in paths]} if paths else {}


def event_update(event: TurnEvent) -> dict[str, Any]:
    """The `update` object for one turn event."""
    if isinstance(event, AgentText):
        return _chunk("agent_message_chunk", event.text)
    if isinstance(event, AgentThought):
        return _chunk("agent_thought_chunk", event.text)
    if isinstance(event, ToolCallStarted):
        return {
            "sessionUpdate": "tool_call",
            "toolCallId": event.call_id,
            "title": event.title,
            "kind": event.kind,
            "status": "in_progress",
            "rawInput": event.raw_input,
            **_locations(event.locations),
        }
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": event.call_id,
        "status": event.status,
        "content": [{"type": "content", "content": text_content(event.output)}],
        **_locations(event.locations),
    }


def replay_updates(messages: list[TranscriptMessage]) -> Iterator[dict[str, Any]]:
    """The updates that rebuild a transcript in the editor, in order."""
    for m in messages:
        if m.role == "user":
            yield _chunk("user_message_chunk", m.content)
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
