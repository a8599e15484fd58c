"""What a tool is to the turn engine: a name, a JSON schema, and an async run()."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

# ACP's ToolKind values; the editor picks an icon from them.
ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know about the session that called it."""

    session_id: str
    cwd: Path
    mode: str


@dataclass
class ToolResult:
    """Plain text written for a model to read; is_error marks a failure the model should see."""

    text: str
    is_error: bool = False
    locations: list[str] = field(default_factory=list)


class ToolError(Exception):
    """Raised by a tool for a failure that goes back to the model as a clear tool error."""


class Tool(Protocol):
    name: str
    description: str
    kind: ToolKind
    parameters: Mapping[str, Any]  # JSON schema of the arguments object
    read_only: bool  # available in ask mode

    def title(self, args: Mapping[str, Any]) -> str:
        """A short human title for the editor's tool-call row."""
        ...

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult: ...

    # Optional: `def locations(self, args, ctx) -> list[str]` names the absolute paths a call
    # touches, shown on the editor's tool_call row before it runs (PreparedCall.locations).
