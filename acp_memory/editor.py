"""The editor on the other end as tools and background tasks see it: its files (with unsaved
buffers), its terminals, and the user who answers permission requests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class TerminalExit:
    """How a command ended: an exit code, or the signal that killed it."""

    exit_code: int | None
    signal: str | None = None


@dataclass(frozen=True)
class TerminalOutput:
    output: str
    truncated: bool
    exit: TerminalExit | None  # None while the command runs


class Editor(Protocol):
    """What the editor on the other end offers tools: its files (with unsaved buffers), its
    terminals, and the user, who answers permission requests. Flags say what it advertised."""

    can_read_files: bool
    can_write_files: bool
    can_run_terminals: bool
    # The user typed the prompt on this process's own command line (print mode): a command's
    # argument is their say, not the model's, and needs no question (`/export PATH`).
    user_is_the_command_line: bool

    async def read_text_file(self, session_id: str, path: str) -> str: ...

    async def write_text_file(self, session_id: str, path: str, content: str) -> None: ...

    async def request_permission(
        self, session_id: str, tool_call: Mapping[str, Any], options: Sequence[Mapping[str, str]]
    ) -> str | None:
        """The optionId the user picked, or None when the turn was cancelled meanwhile."""
        ...

    async def create_terminal(
        self, session_id: str, command: str, cwd: str, output_byte_limit: int
    ) -> str: ...

    async def terminal_output(self, session_id: str, terminal_id: str) -> TerminalOutput: ...

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str) -> TerminalExit: ...

    async def kill_terminal(self, session_id: str, terminal_id: str) -> None: ...

    async def release_terminal(self, session_id: str, terminal_id: str) -> None: ...


class EditorFor:
    """An editor used on behalf of another session (a child's tools), every request made in
    the name of the session the editor knows."""

    def __init__(self, editor: Editor, session_id: str) -> None:
        self._editor = editor
        self._session_id = session_id
        self.can_read_files = editor.can_read_files
        self.can_write_files = editor.can_write_files
        self.can_run_terminals = editor.can_run_terminals
        self.user_is_the_command_line = editor.user_is_the_command_line

    async def read_text_file(self, session_id: str, path: str) -> str:
        return await self._editor.read_text_file(self._session_id, path)

    async def write_text_file(self, session_id: str, path: str, content: str) -> None:
        await self._editor.write_text_file(self._session_id, path, content)

    async def request_permission(
        self, session_id: str, tool_call: Mapping[str, Any], options: Sequence[Mapping[str, str]]
    ) -> str | None:
        return await self._editor.request_permission(self._session_id, tool_call, options)

    async def create_terminal(
        self, session_id: str, command: str, cwd: str, output_byte_limit: int
    ) -> str:
        return await self._editor.create_terminal(
            self._session_id, command, cwd, output_byte_limit
        )

    async def terminal_output(self, session_id: str, terminal_id: str) -> TerminalOutput:
        return await self._editor.terminal_output(self._session_id, terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str) -> TerminalExit:
        return await self._editor.wait_for_terminal_exit(self._session_id, terminal_id)

    async def kill_terminal(self, session_id: str, terminal_id: str) -> None:
        await self._editor.kill_terminal(self._session_id, terminal_id)

    async def release_terminal(self, session_id: str, terminal_id: str) -> None:
        await self._editor.release_terminal(self._session_id, terminal_id)
