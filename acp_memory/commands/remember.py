"""/remember TEXT and /forget TEXT: one memory run in persist mode on TEXT, the one exception to
"commands start no memory run". It is an ordinary memory run (a system task with its
memory_run updates, within the bounds and keep_runs); its report is the reply."""

from __future__ import annotations

from acp_memory.commands.base import CommandCall
from acp_memory.engine.turn import PlainContext
from acp_memory.runtime.memory_run import MemoryRun


class Persist:
    """A command that asks the memory subagent to change the notes."""

    def __init__(self, name: str, description: str, lead: str) -> None:
        self.name = name
        self.description = description
        self.hint: str | None = f"what to {name}"
        self.lead = lead  # the child's task opens with it, so it picks persist mode

    async def run(self, call: CommandCall) -> str:
        runner, session = call.runner, call.session
        text = call.argument
        if not text:
            return f"Usage: /{self.name} TEXT"
        if session.record.mode == "ask":
            return (
                f"/{self.name} is unavailable in ask mode: memory is read-only here. "
                "Switch to agent or plan mode to change the notes."
            )
        if not runner.memory_due(session):
            return f"/{self.name} needs this session's memory option on; nothing was changed."
        # With memory.review: ask, its writes are put to the user as a turn's are.
        questions = (None if call.emit is None
                     else runner.review_questions(session, call.editor, call.emit))
        run = MemoryRun(runner.memory, session, f"{self.lead} {text}", call.notify_memory,
                        PlainContext(), questions)
        return await run.reply()


REMEMBER = Persist("remember", "Save something to long-term memory (a memory run)", "Remember that")
FORGET = Persist("forget", "Remove something from long-term memory (a memory run)", "Forget that")
