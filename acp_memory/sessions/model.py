"""What a session bundle holds: session.json and the messages.json transcript."""

from __future__ import annotations

import secrets
from typing import Any, Literal

from pydantic import Field

from acp_memory.camel import CamelModel
from acp_memory.timestamps import now_iso

BUNDLE_VERSION = 1


def new_session_id() -> str:
    """`sess_` + 24 hex digits."""
    return "sess_" + secrets.token_hex(12)


def is_session_id(value: str) -> bool:
    """Whether `value` has the shape new_session_id() makes (and so is a safe folder name)."""
    digits = value.removeprefix("sess_")
    return (
        value.startswith("sess_")
        and len(digits) == 24
        and all(c in "0123456789abcdef" for c in digits)
    )


class SessionRecord(CamelModel):
    """session.json."""

    version: int = BUNDLE_VERSION
    id: str
    cwd: str
    mode: str = "agent"
    selected_model_id: str
    title: str = ""
    created_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)
    agent_memory: str = ""
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    # memory.inline: the notes as loaded at session/new, the head of every system message;
    # frozen for the session so the cached prefix stays stable (top-level sessions only).
    inline_memory: str | None = None
    # Child bundles only.
    subagent_run: bool | None = None
    parent_session_id: str | None = None
    subagent_name: str | None = None
    subagent_task_id: str | None = None
    subagent_depth: int | None = None


class StoredToolCall(CamelModel):
    id: str
    name: str
    arguments: str
    title: str | None = None
    kind: str | None = None
    locations: list[str] | None = None  # what the editor was shown, for a faithful replay


class TranscriptMessage(CamelModel):
    """One entry of messages.json: a user message, an assistant reply, a tool result, or a
    compaction marker (/compact) whose content is the summary of everything before it."""

    role: Literal["user", "assistant", "tool", "compaction"]
    content: str = ""
    reasoning: str | None = None
    tool_calls: list[StoredToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool | None = None
    locations: list[str] | None = None
    content_extra: list[dict[str, Any]] | None = None  # diffs, terminals: as the editor saw them
    created_at: str = Field(default_factory=now_iso)


def since_compaction(messages: list[TranscriptMessage]) -> list[TranscriptMessage]:
    """What a request starts from: the last compaction marker and what follows it (the
    folded messages stay on disk), or the whole transcript when it was never compacted."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "compaction":
            return messages[index:]
    return messages


class Transcript(CamelModel):
    """messages.json."""

    version: int = BUNDLE_VERSION
    messages: list[TranscriptMessage] = Field(default_factory=list)
