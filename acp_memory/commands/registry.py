"""The built-in commands, and how a prompt names one: its text starts with `/name`, followed by
whitespace or nothing. An unknown `/word` is an ordinary prompt."""

from __future__ import annotations

import re

from acp_memory.commands.base import Command, CommandCall
from acp_memory.commands.compact import Compact
from acp_memory.commands.export import Export
from acp_memory.commands.remember import FORGET, REMEMBER
from acp_memory.commands.status import MemoryStatus
from acp_memory.editor import Editor
from acp_memory.engine.events import Emit
from acp_memory.runtime.memory_run import NotifyMemory
from acp_memory.runtime.runner import SessionRunner
from acp_memory.sessions.store import Session


class Help:
    name = "help"
    description = "List the built-in commands"
    hint: str | None = None

    async def run(self, call: CommandCall) -> str:
        lines = ["Built-in commands (they start no memory run; only /remember and /forget do):"]
        for command in COMMANDS:
            shown = f"/{command.name}" + (f" <{command.hint}>" if command.hint else "")
            lines.append(f"- {shown}: {command.description}")
        lines.append("Any other text starting with / is an ordinary prompt.")
        return "\n".join(lines)


COMMANDS: tuple[Command, ...] = (Compact(), Export(), MemoryStatus(), REMEMBER, FORGET, Help())
_BY_NAME = {command.name: command for command in COMMANDS}
_NAMED = re.compile(r"/([\w-]+)(?:\s+(.*))?$", re.DOTALL)


class BuiltinCommands:
    """The commands as the session runner runs them (build.py hands it this)."""

    async def reply(
        self,
        runner: SessionRunner,
        session: Session,
        text: str,
        editor: Editor | None,
        notify_memory: NotifyMemory | None,
        emit: Emit | None = None,
    ) -> str | None:
        """The reply of the command a prompt names, or None for an ordinary prompt."""
        if (found := find_command(text)) is None:
            return None
        command, argument = found
        return await command.run(
            CommandCall(runner, session, argument, editor, notify_memory, emit)
        )


def find_command(text: str) -> tuple[Command, str] | None:
    """The command a prompt names and the text after its name, or None for a prompt."""
    match = _NAMED.match(text)
    command = _BY_NAME.get(match[1]) if match else None
    if match is None or command is None:
        return None
    return command, (match[2] or "").strip()
