"""What a running turn reports, free of any wire format; the ACP layer maps these to updates."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from acp_memory.sessions.model import PlanEntry
from acp_memory.tools.base import ToolContent


@dataclass(frozen=True)
class AgentText:
    text: str
    # The transcript message this is a chunk of (its chunks share it); None: a whole
    # message of its own, never stored.
    message_id: str | None = None


@dataclass(frozen=True)
class PromptBlocked(AgentText):
    """The agent's message when a UserPromptSubmit hook blocked the prompt: the text names
    the hook and its reason (a surface that reports it apart, as print mode does, can tell)."""


@dataclass(frozen=True)
class ServerNotice(AgentText):
    """The line about an MCP server that failed to start or died (`MCP server <name>:
    <reason>`): never in the transcript, and a surface may report it apart."""


@dataclass(frozen=True)
class AgentThought:
    text: str
    message_id: str | None = None  # the transcript message whose reasoning this is


@dataclass(frozen=True)
class ToolCallStarted:
    call_id: str
    title: str
    kind: str
    raw_input: Any
    locations: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ToolCallProgress:
    """Content a running call shows on its row (a terminal, a diff) before it finishes."""

    call_id: str
    content: list[ToolContent]


@dataclass(frozen=True)
class ToolCallFinished:
    call_id: str
    status: Literal["completed", "failed"]
    output: str
    locations: list[str] = field(default_factory=list)
    content: list[ToolContent] = field(default_factory=list)


@dataclass(frozen=True)
class ContextUsage:
    """After a model response: the tokens of that request (prompt and completion) against the
    model's window, and the session's cost so far (None: the model has no price)."""

    used: int
    size: int
    cost: float | None = None
    currency: str = "USD"


@dataclass(frozen=True)
class PlanUpdated:
    """The session's whole plan, as update_plan last sent it (the editor replaces its own)."""

    entries: list[PlanEntry]


TurnEvent = (
    AgentText
    | AgentThought
    | ToolCallStarted
    | ToolCallProgress
    | ToolCallFinished
    | ContextUsage
    | PlanUpdated
)
Emit = Callable[[TurnEvent], Awaitable[None]]
