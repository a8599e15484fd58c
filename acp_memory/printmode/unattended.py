"""The editor's place in print mode, where nobody is there to ask: no files or terminals of its
own (the tools use the local disk and local processes), and permission requests answered at
once, allowed with --yes and otherwise denied with a line on stderr (the call fails saying
nobody was asked). A memory change under memory.review: ask is never asked about either:
--yes makes it, otherwise it is held for approval, with a line on stderr saying how to
approve it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from acp_memory.editor import TerminalExit, TerminalOutput
from acp_memory.tools.base import ToolError

NO_EDITOR = "print mode has no editor"
# What the model reads of a call that needed permission without --yes.
NOBODY_ASKED = "not run: print mode asks nobody; pass --yes or set tools.permission_mode"


class Unattended:
    """An `Editor` whose only service is answering the permission gate, by a rule."""

    can_read_files = False
    can_write_files = False
    can_run_terminals = False
    # What the user typed (`-p "/export PATH"`) is their own say: a command that would ask
    # them about its argument (commands/export.py) takes it as given.
    user_is_the_command_line = True
    # As a memory review's Reviewer (memory/review.py): a rule, answering after the turn too.
    attended = False

    def __init__(self, *, allow: bool, permission_mode: str, say: Callable[[str], None]) -> None:
        self.allow = allow
        self.permission_mode = permission_mode
        self.say = say

    async def request_permission(
        self, session_id: str, tool_call: Mapping[str, Any], options: Sequence[Mapping[str, str]]
    ) -> str | None:
        """Allowed with --yes; otherwise a line on stderr, and the call fails with why (a
        rejection would tell the model that somebody was asked and said no)."""
        if self.allow:
            return "allow_once"
        title = tool_call.get("title") or "a tool call"
        self.say(
            f"denied: {title} needs permission (tools.permission_mode is "
            f"{self.permission_mode}); --yes allows it"
        )
        raise ToolError(NOBODY_ASKED)

    async def review(
        self, session_id: str, tool_call: Mapping[str, Any], options: Sequence[Mapping[str, str]]
    ) -> str | None:
        """A memory change: made with --yes, else held (None)."""
        return "allow_once" if self.allow else None

    def held(self, display: str, pending_id: str) -> None:
        self.say(
            f"memory change held for approval ({pending_id}): {display}; see "
            f"`acp-memory notes pending`, approve with `acp-memory notes approve {pending_id}` "
            "(--yes makes such changes)"
        )

    # The flags above keep the tools from asking for these; an answer, should one ask anyway.

    async def read_text_file(self, session_id: str, path: str) -> str:
        raise ToolError(NO_EDITOR)

    async def write_text_file(self, session_id: str, path: str, content: str) -> None:
        raise ToolError(NO_EDITOR)

    async def create_terminal(
        self, session_id: str, command: str, cwd: str, output_byte_limit: int
    ) -> str:
        raise ToolError(NO_EDITOR)

    async def terminal_output(self, session_id: str, terminal_id: str) -> TerminalOutput:
        raise ToolError(NO_EDITOR)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str) -> TerminalExit:
        raise ToolError(NO_EDITOR)

    async def kill_terminal(self, session_id: str, terminal_id: str) -> None:
        raise ToolError(NO_EDITOR)

    async def release_terminal(self, session_id: str, terminal_id: str) -> None:
        raise ToolError(NO_EDITOR)
