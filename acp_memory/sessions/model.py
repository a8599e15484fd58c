"""What a session bundle holds: session.json and the messages.json transcript."""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field

from acp_memory.camel import CamelModel
from acp_memory.timestamps import now_iso

BUNDLE_VERSION = 1


def new_session_id() -> str:
    """`sess_` + 24 hex digits."""
    return "sess_" + secrets.token_hex(12)


def new_message_id() -> str:
    """A transcript message's id, the `messageId` of its chunks on the wire: a UUID."""
    return str(uuid.uuid4())


# Every surface takes the ids new_session_id() makes and the ones a user names (`acp
# --session-id example-acp-models`, as the reference agent allows): each is a safe folder name,
# never `.`, `..`, hidden or a path. Names differing in case only are the user's to keep apart:
# a bundle is opened only when its session.json holds the id asked for (SessionStore.load).
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
SESSION_ID_RULE = "1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"


def is_session_id(value: str) -> bool:
    """Whether `value` can name a session (see SESSION_ID_RULE): the one check of every
    surface, and what keeps a bundle's folder inside the sessions folder."""
    return _SESSION_ID.fullmatch(value) is not None


class SessionCost(CamelModel):
    """A session's cumulative cost in one currency (ACP's `Cost`)."""

    amount: float = 0.0
    currency: str = "USD"


class ProxiedAgent(CamelModel):
    """A proxied session's origin (`acp-memory proxy`): the inner agent's session id, kept as
    text (it is untrusted, never a path), and the command that runs the inner agent."""

    inner_session_id: str
    command: list[str]


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
    # ACP's additionalDirectories: workspace roots besides cwd, absolute folders.
    additional_directories: list[str] = Field(default_factory=list)
    # memory.inline: the notes as loaded at session/new, the head of every system message;
    # frozen for the session so the cached prefix stays stable (top-level sessions only).
    inline_memory: str | None = None
    # The session's `memory` option once the client switched it: its turns start memory runs
    # or not whatever memory.enable says (None: as memory.enable says; top-level only).
    memory_enabled: bool | None = None
    # What the main agent's model calls of every turn so far cost, at models[].price.
    cost: SessionCost | None = None
    # The messageId of the last message a reflection run covered; set only when it succeeded
    # (the next reflection starts after it; None: none has yet).
    reflected_through: str | None = None
    # A proxy's record of another agent's session (its bundle under `<sessions dir>/proxy`).
    proxy: ProxiedAgent | None = None
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


PlanStatus = Literal["pending", "in_progress", "completed"]
PlanPriority = Literal["high", "medium", "low"]


class PlanEntry(CamelModel):
    """One entry of the plan the editor shows (ACP's PlanEntry), as update_plan sent it."""

    content: str
    status: PlanStatus
    priority: PlanPriority = "medium"


IMAGE_MARK = "[image]"


class TextPart(CamelModel):
    type: Literal["text"] = "text"
    text: str


class ImagePart(CamelModel):
    """An image of a user's prompt as its ACP block carried it: base64 data and its type."""

    type: Literal["image"] = "image"
    data: str
    mime_type: str


# A prompt's blocks as the transcript keeps them: the shapes of ACP's text and image content.
PromptPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


def prompt_text(prompt: str | Sequence[TextPart | ImagePart]) -> str:
    """A prompt's text, each image marked [image] where it was (what commands, hooks, the
    memory subagent and titles read)."""
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(p.text if isinstance(p, TextPart) else IMAGE_MARK for p in prompt)


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
    # A user prompt's or an assistant reply's id: live and replayed chunks carry the same.
    message_id: str | None = None
    plan: list[PlanEntry] | None = None  # update_plan's entries, replayed as its update
    # A user prompt holding an image, block by block (content is then its prompt_text).
    parts: list[PromptPart] | None = None
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
