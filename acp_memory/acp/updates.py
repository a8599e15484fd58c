"""session/update payloads: live turn events and the replay of a stored transcript."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import Any, Literal, assert_never

from acp_memory.acp.schema import text_content
from acp_memory.commands.base import Command
from acp_memory.config.models import MemoryRunUpdates
from acp_memory.engine.events import (
    AgentText,
    AgentThought,
    ContextUsage,
    PlanUpdated,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    TurnEvent,
)
from acp_memory.engine.turn import NOT_RUN_RESULT
from acp_memory.sessions.model import StoredToolCall, TranscriptMessage, new_message_id
from acp_memory.tools.base import (
    Diff,
    ImageView,
    LinkView,
    TerminalView,
    ToolContent,
)
from acp_memory.tools.registry import parse_arguments

# A thought and the reply it came with are two messages to ACP, though one in the transcript:
# the thought's id is derived from the message's, so that a replay gives it the same one.
_THOUGHTS = uuid.UUID("6f1c2a4e-2d0b-4a8e-9a51-0c7d3e1b9f20")


def _chunk(kind: str, text: str, message_id: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": text_content(text), "messageId": message_id}


def _thought_id(message_id: str | None) -> str:
    return str(uuid.uuid5(_THOUGHTS, message_id)) if message_id else new_message_id()


def _locations(paths: list[str]) -> dict[str, Any]:
    return {"locations": [{"path": p} for p in paths]} if paths else {}


def tool_content(content: ToolContent) -> dict[str, Any]:
    """A diff, an embedded terminal, an image or a resource link as ACP tool call content."""
    match content:
        case Diff():
            return {
                "type": "diff",
                "path": content.path,
                "newText": content.new,
                **({"oldText": content.old} if content.old is not None else {}),
            }
        case TerminalView():
            return {"type": "terminal", "terminalId": content.terminal_id}
        case ImageView():
            image = {"type": "image", "data": content.data, "mimeType": content.mime_type}
            return {"type": "content", "content": image}
        case LinkView():
            link = {"type": "resource_link", "uri": content.uri, "name": content.name}
            if content.mime_type:
                link["mimeType"] = content.mime_type
            return {"type": "content", "content": link}
        case _:
            assert_never(content)


def _stored_content(data: dict[str, Any]) -> ToolContent:
    if data.get("type") == "terminal":
        return TerminalView(str(data.get("terminalId", "")))
    if data.get("type") == "image":
        return ImageView(str(data.get("data", "")), str(data.get("mimeType", "")))
    if data.get("type") == "resource_link":
        return LinkView(str(data.get("uri", "")), str(data.get("name", "")), data.get("mimeType"))
    return Diff(str(data.get("path", "")), data.get("oldText"), str(data.get("newText", "")))


def event_update(event: TurnEvent) -> dict[str, Any]:
    """The `update` object for one turn event."""
    match event:
        case AgentText(text, message_id):
            # One without a transcript message (a command's reply) is a message of its own.
            return _chunk("agent_message_chunk", text, message_id or new_message_id())
        case AgentThought(text, message_id):
            return _chunk("agent_thought_chunk", text, _thought_id(message_id))
        case ToolCallStarted():
            return {
                "sessionUpdate": "tool_call",
                "toolCallId": event.call_id,
                "title": event.title,
                "kind": event.kind,
                "status": "in_progress",
                "rawInput": event.raw_input,
                **_locations(event.locations),
            }
        case ToolCallProgress():
            return {
                "sessionUpdate": "tool_call_update",
                "toolCallId": event.call_id,
                "content": [tool_content(c) for c in event.content],
            }
        case ToolCallFinished():
            return {
                "sessionUpdate": "tool_call_update",
                "toolCallId": event.call_id,
                "status": event.status,
                "content": [
                    {"type": "content", "content": text_content(event.output)},
                    *(tool_content(c) for c in event.content),
                ],
                **_locations(event.locations),
            }
        case ContextUsage():
            cost = {} if event.cost is None else {
                "cost": {"amount": event.cost, "currency": event.currency}
            }
            return {"sessionUpdate": "usage_update", "used": event.used, "size": event.size,
                    **cost}
        case PlanUpdated():
            return {
                "sessionUpdate": "plan",
                "entries": [e.dump() for e in event.entries],
            }
        case _:
            assert_never(event)


def replay_updates(messages: list[TranscriptMessage]) -> Iterator[dict[str, Any]]:
    """The updates that rebuild a transcript in the editor, in order, as it saw them live."""
    # Live, a call is shown when it starts running, just before its result; calls the turn
    # never started were never shown (their stored results exist for the model's sake).
    started: dict[str, dict[str, Any]] = {}
    for m in messages:
        if m.role == "tool" and m.tool_call_id:
            start = started.pop(m.tool_call_id, None)
            if m.content == NOT_RUN_RESULT:
                continue
            if start is not None:
                yield start
            status: Literal["completed", "failed"] = "failed" if m.is_error else "completed"
            extra = [_stored_content(c) for c in m.content_extra or ()]
            yield event_update(
                ToolCallFinished(m.tool_call_id, status, m.content, m.locations or [], extra)
            )
            if m.plan is not None:
                yield event_update(PlanUpdated(m.plan))
            continue
        # A call with no result at all (the process died mid-call) is shown as it was left.
        yield from started.values()
        started.clear()
        # Stored with the message; one stored before messages had ids gets one for this replay.
        message_id = m.message_id or new_message_id()
        if m.role == "user" and m.parts:
            # A prompt holding images, block by block as the editor sent it.
            for part in m.parts:
                yield {
                    "sessionUpdate": "user_message_chunk",
                    "content": part.dump(),
                    "messageId": message_id,
                }
        elif m.role == "user":
            yield _chunk("user_message_chunk", m.content, message_id)
        elif m.role == "assistant":
            if m.reasoning:
                yield event_update(AgentThought(m.reasoning, message_id))
            if m.content:
                yield event_update(AgentText(m.content, message_id))
            for call in m.tool_calls or ():
                started[call.id] = event_update(_started(call))
        elif m.role == "compaction":
            # /compact's summary, where it was made: after the history it folded.
            yield event_update(AgentText(m.content))
    yield from started.values()


MEMORY_RUN_METHOD = "_acp_memory/memory_run"


def memory_run_message(
    form: MemoryRunUpdates, session_id: str, update: dict[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    """A memory_run update as the notification (method, params) its form says: a
    session/update variant (v1 clients drop what they do not know), an extension
    notification, or None (off)."""
    if form == "off":
        return None
    if form == "ext_notification":
        return MEMORY_RUN_METHOD, {"sessionId": session_id, **update}
    return "session/update", {"sessionId": session_id,
                              "update": {"sessionUpdate": "memory_run", **update}}


def commands_update(commands: Iterable[Command]) -> dict[str, Any]:
    """The available_commands_update that advertises the built-in slash commands."""
    return {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [
            {
                "name": c.name,
                "description": c.description,
                **({"input": {"hint": c.hint}} if c.hint else {}),
            }
            for c in commands
        ],
    }


def _started(call: StoredToolCall) -> ToolCallStarted:
    args = parse_arguments(call.arguments)
    raw_input = args if isinstance(args, dict) else call.arguments
    return ToolCallStarted(
        call.id, call.title or call.name, call.kind or "other", raw_input, call.locations or []
    )
