"""What a command is, and what it is given when it runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from acp_memory.editor import Editor
from acp_memory.engine.events import Emit
from acp_memory.runtime.memory_run import NotifyMemory
from acp_memory.runtime.runner import SessionRunner
from acp_memory.sessions.store import Session


@dataclass(frozen=True)
class CommandCall:
    """One use of a command: the session, the text after its name, and the surface's services."""

    runner: SessionRunner
    session: Session
    argument: str  # the text after the name, stripped
    editor: Editor | None = None
    notify_memory: NotifyMemory | None = None
    emit: Emit | None = None  # the turn's stream, where a memory run's review updates go


class Command(Protocol):
    name: str  # typed as /name
    description: str
    hint: str | None  # what the input is, shown until it is typed; None: the command takes none

    async def run(self, call: CommandCall) -> str:
        """The reply, streamed to the editor and never written to the transcript."""
        ...
