"""The turn's memory run as print mode follows it: its updates as they come, the wait before
the process exits (a persist cut short loses its note), and its last state for the result."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio

from acp_memory.clock import Clock
from acp_memory.memory.history.summary import counted
from acp_memory.memory.review import HELD_PREFIX
from acp_memory.memory.tools import came_back_empty
from acp_memory.printmode.console import Console, RunOutcome
from acp_memory.printmode.output import Output
from acp_memory.runtime.memory_agent import NO_HITS, READ_TOOLS
from acp_memory.runtime.memory_run import finished_update, run_tokens
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import BundleError, SessionNotFound, load_bundle
from acp_memory.tasks.records import TaskRecord, format_seconds

# The seed: a one-shot run says on stderr that it is waiting for its memory run after 15 s.
EXIT_NOTICE_SECONDS = 15.0
# Past the run's own timeout, the time its pool takes to stop it and write its record.
SETTLE_GRACE_SECONDS = 10.0
# The memory tools that change the notes (a folder alone changes nothing anyone reads).
CHANGING_TOOLS = frozenset({"memory_save", "memory_delete"})


class RunTask(Protocol):
    """What the watch reads of the run's task (a tasks.task.Task)."""

    @property
    def id(self) -> str: ...

    done: anyio.Event
    record: TaskRecord
    result: str | None


def changed_notes(messages: Sequence[TranscriptMessage]) -> bool:
    """Whether a memory run's transcript holds a save or a delete that succeeded (one held
    for approval changed nothing yet)."""
    return any(
        m.role == "tool" and m.name in CHANGING_TOOLS and not m.is_error
        and not m.content.startswith(HELD_PREFIX)
        for m in messages
    )


def held_changes(messages: Sequence[TranscriptMessage]) -> list[str]:
    """The pending ids of the changes a memory run's transcript holds for approval."""
    return [
        m.content[len(HELD_PREFIX):].split(")", 1)[0]
        for m in messages
        if m.role == "tool" and m.name in CHANGING_TOOLS and m.content.startswith(HELD_PREFIX)
    ]


def found_nothing(messages: Sequence[TranscriptMessage]) -> bool:
    """Whether a memory run looked for notes and every look came back empty (no match, an
    empty folder, a note that is not there or a root refused)."""
    looks = [m for m in messages if m.role == "tool" and m.name in READ_TOOLS]
    return bool(looks) and all(m.is_error or came_back_empty(m.content) for m in looks)


class MemoryWatch:
    """Follows one turn's memory run for print mode's console, output and result."""

    def __init__(
        self,
        session_id: str,
        console: Console,
        output: Output,
        find_task: Callable[[str], RunTask | None],
        subagents: Path | None = None,
    ) -> None:
        self.session_id = session_id
        self.console = console
        self.output = output
        self.find_task = find_task
        self.subagents = subagents  # the session's subagents/ folder: the runs' transcripts
        self.task: RunTask | None = None
        self.last: dict[str, Any] | None = None  # the latest update

    async def notify(self, update: dict[str, Any]) -> None:
        """The runner's notify_memory: a started, finished or skipped update."""
        if update.get("status") == "started":
            self.task = self.find_task(str(update.get("taskId")))
        await self._tell(update)

    @property
    def settled(self) -> bool:
        return self.last is None or self.last.get("status") != "started"

    async def wait_before_exit(
        self, clock: Clock, notice_after: float = EXIT_NOTICE_SECONDS
    ) -> None:
        """Keep the process until the run settled, within the run's timeout; after
        notice_after seconds, say so on stderr."""
        task = self.task
        if task is None or self.settled:
            return
        if not task.done.is_set():
            left = _time_left(task.record)
            bound = None if left is None else left + SETTLE_GRACE_SECONDS
            self.console.status(f"memory: finishing before exit (task {task.id})")
            with clock.move_on_after(bound):
                with clock.move_on_after(notice_after):
                    await task.done.wait()
                if not task.done.is_set():
                    left = _time_left(task.record)
                    most = "" if left is None else f", at most {format_seconds(left)} more"
                    self.console.line(
                        f"memory: waiting for the memory run to finish before exiting "
                        f"(task {task.id}{most}; Ctrl-C stops it)"
                    )
                    await task.done.wait()
        await self.settle()

    async def settle(self) -> None:
        """A run that settled after the turn's stream ended: its finished update for the
        console and the output, as the runner would have sent it during the turn."""
        task = self.task
        if task is None or self.settled or not task.done.is_set():
            return
        assert self.last is not None
        child = self.last.get("childSessionId")
        await self._tell(finished_update(task.id, child, task.record, delivered=False))

    def summary(self) -> dict[str, Any] | None:
        """The result object's `memory`: the run's last known state, None without a run."""
        last = self.last
        if last is None:
            return None
        task_status = last.get("taskStatus")
        if last.get("status") == "started" and self.task is not None:
            task_status = self.task.record.status  # still unsettled: as its record says now
        return {
            "taskId": last.get("taskId"),
            "status": last.get("status"),
            "taskStatus": task_status,
            "durationMs": last.get("durationMs"),
            "delivered": bool(last.get("delivered", False)),
            "reason": last.get("reason"),
            # What the run cost, apart from the turn's usage (None while it runs).
            "usage": run_tokens(last),
        }

    async def _tell(self, update: dict[str, Any]) -> None:
        self.last = update
        self.output.update(self.session_id, {"sessionUpdate": "memory_run", **update})
        self.console.memory(update, await self._outcome(update))

    async def _outcome(self, update: dict[str, Any]) -> RunOutcome | None:
        """What a run that succeeded did, as its own records say: its transcript holds changes
        held for approval, a save or a delete, or its report is the memory agent's word for
        no hits."""
        if update.get("status") != "finished" or update.get("taskStatus") != "succeeded":
            return None
        child = update.get("childSessionId")
        if self.subagents is not None and isinstance(child, str) and child:
            folder = self.subagents / child
            try:
                messages = (await anyio.to_thread.run_sync(load_bundle, folder)).messages
            except (BundleError, SessionNotFound, OSError):
                messages = []  # no transcript to read: told by its report alone
            if held := held_changes(messages):  # before found_nothing: its search found none
                return f"held {counted(len(held), 'change')} for approval ({', '.join(held)})"
            if changed_notes(messages):
                return "saved"
            if found_nothing(messages):  # a forget of no note, a refused save: not a recall
                return "nothing found"
        task = self.task
        if task is not None and (task.result or "").strip() == NO_HITS:
            return "nothing found"
        return None


def _time_left(record: TaskRecord) -> float | None:
    """Seconds until the run's timeout, None without one."""
    if record.timeout_seconds is None:
        return None
    return max(record.timeout_seconds - (record.elapsed_seconds() or 0.0), 0.0)
