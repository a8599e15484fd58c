"""What a tool is to the turn engine: a name, a JSON schema, and an async run().

A tool sees its session through a ToolContext: the workspace, and the services the session
runner provides (the editor, the permission gate, the background pool, child agents). A service
is None where the surface has none (print mode has no editor): a tool then falls back (local
disk, a local process) or refuses with a clear error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from acp_memory.editor import Editor
from acp_memory.sessions.model import PlanEntry

# ACP's ToolKind values; the editor picks an icon from them.
ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]


@dataclass(frozen=True)
class Diff:
    """A file change the editor shows as a diff; old is None for a new file."""

    path: str
    old: str | None
    new: str


@dataclass(frozen=True)
class TerminalView:
    """A terminal the editor created (terminal/create), embedded in the tool call's row."""

    terminal_id: str


@dataclass(frozen=True)
class ImageView:
    """An image a tool returned (an MCP server's), shown on the call's row."""

    data: str  # base64
    mime_type: str


@dataclass(frozen=True)
class LinkView:
    """A resource a tool named but did not give as text, shown as a link on the call's row."""

    uri: str
    name: str
    mime_type: str | None = None


ToolContent = Diff | TerminalView | ImageView | LinkView


@dataclass
class ToolResult:
    """Plain text written for a model to read; is_error marks a failure the model should see.

    `content` is what the editor shows besides the text (a diff, a terminal).
    """

    text: str
    is_error: bool = False
    locations: list[str] = field(default_factory=list)
    content: list[ToolContent] = field(default_factory=list)
    plan: list[PlanEntry] | None = None  # the session's whole new plan (update_plan)


class ToolError(Exception):
    """Raised by a tool for a failure that goes back to the model as a clear tool error."""


class TurnCancelled(Exception):
    """Raised by a tool when the user cancelled the turn from inside it (a permission prompt
    answered `cancelled`): the call ends failed and the turn ends with stopReason cancelled."""


PermissionKind = Literal["command", "write", "outside", "mcp"]


@dataclass(frozen=True)
class PermissionRequest:
    """What a tool wants to do that may need the user's yes.

    kind: "command" (subject: the command line), "write" (subject: the absolute path written
    inside the workspace), "outside" (subject: an absolute path outside the workspace, to read
    or to write), "mcp" (subject: the MCP tool's name, `mcp__<server>__<tool>`; raw_input: its
    arguments, shown to the user).
    """

    kind: PermissionKind
    subject: str
    title: str
    raw_input: Any = None


class Permissions(Protocol):
    async def ensure(self, ctx: ToolContext, request: PermissionRequest) -> None:
        """Return when allowed; ToolError when refused, TurnCancelled when cancelled."""
        ...


Progress = Callable[[Sequence[ToolContent]], Awaitable[None]]


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know about the session that called it."""

    session_id: str
    cwd: Path
    mode: str
    call_id: str = ""
    roots: tuple[Path, ...] = ()  # workspace roots besides cwd (additionalDirectories)
    bundle: Path | None = None  # the session's bundle folder (plans/ lives there)
    editor: Editor | None = None
    permissions: Permissions | None = None
    tasks: Any = None  # the session's background pool (acp_memory.tasks.pool.TaskPool)
    agents: Any = None  # starts child sessions (spawn_agent)
    progress: Progress | None = None  # shows content on the call's row while it runs
    output_limit: int = 30_000  # characters of tool output a model reads (tools.output_limits)
    message: str = ""  # the user message of the turn (where a note change came from)


class Tool(Protocol):
    name: str
    description: str
    kind: ToolKind
    parameters: Mapping[str, Any]  # JSON schema of the arguments object
    read_only: bool  # changes nothing outside the session bundle

    def title(self, args: Mapping[str, Any]) -> str:
        """A short human title for the editor's tool-call row."""
        ...

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult: ...

    # Optional: `def locations(self, args, ctx) -> list[str]` names the absolute paths a call
    # touches, shown on the editor's tool_call row before it runs (PreparedCall.locations).
