"""What a running turn reports, free of any wire format; the ACP layer maps these to updates."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from acp_memory.tools.base import ToolContent


@dataclass(frozen=True)
class AgentText:
    text: str


@dataclass(frozen=True)
class PromptBlocked(AgentText):
    """The agent's message when a UserPromptSubmit hook blocked the prompt: the text names
    the hook and its reason (a surface that reports it apart, as print mode does, can tell)."""


@dataclass(frozen=True)
class AgentThought:
    text: str


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


TurnEvent = AgentText | AgentThought | ToolCallStarted | ToolCallProgress | ToolCallFinished
Emit = Callable[[TurnEvent], Awaitable[None]]
