"""Reflection runs: what a whole session taught, saved once it is let go or closed.

A per-turn memory run sees one user message. When a session is let go for idleness, or
closed, and it has at least `memory.reflect.min_turns` user turns since its last reflection,
a reflection run starts: the memory child (the memory service's launch: the same pool bounds,
models and tools) on `reflect_agent.md`, its task the transcript since the last reflection
(`text/session_text.py`), cut to `memory.reflect.max_chars` keeping the newest, redacted.

session.json's `reflectedThrough` moves only when a run succeeded; one that failed, or that
the close's bounded wait cut short, is tried again at the session's next load or release
(once per opening: a failing model is not retried on every idle tick). Its memory_run updates
are a turn's, with `_meta.acpMemory.kind: "reflect"` and never delivered; its writes are
journaled with the surface `reflect`, and with memory.review: ask they are held (no turn to
ask in). Sessions in mode ask, children and print mode (which lets no session go) never
reflect.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import anyio

from acp_memory.memory.redact import redact_text
from acp_memory.memory.review import TurnQuestions
from acp_memory.runtime.memory_run import finished_update, kind_meta, run_reason, send_update
from acp_memory.runtime.memory_service import Launched, MemoryService
from acp_memory.runtime.run_retention import is_memory_run
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import Session
from acp_memory.tasks.admission import PoolRefused
from acp_memory.tasks.records import TaskRecord
from acp_memory.tasks.task import Task
from acp_memory.text import session_text

log = logging.getLogger(__name__)

# A surface's way to the editor of a session: (session id, memory_run update).
NotifySession = Callable[[str, dict[str, Any]], Awaitable[None]]
# A prompt naming a command (/memory, an inner agent's own through the proxy) is no turn of
# the work: commands are seldom kept in a transcript, and never counted when they are.
_COMMAND = re.compile(r"/[A-Za-z][\w-]*(?:\s|$)")


def is_reflection_run(record: TaskRecord) -> bool:
    """Whether a memory run's record is a reflection's (its label names its task's head):
    `/memory undo` takes a turn's run, never one of these."""
    return is_memory_run(record) and record.label.startswith(f"memory: {session_text.HEAD}")


def since_reflection(messages: Sequence[TranscriptMessage], through: str | None) -> list[
    TranscriptMessage
]:
    """The messages after the one `through` names (all of them when none does)."""
    if through is not None:
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].message_id == through:
                return list(messages[index + 1 :])
    return list(messages)


def user_turns(messages: Sequence[TranscriptMessage]) -> int:
    """The user turns among messages; slash commands do not count."""
    return sum(1 for m in messages if m.role == "user" and not _COMMAND.match(m.content))


def last_id(messages: Sequence[TranscriptMessage]) -> str | None:
    """The id of the last message that has one (tool results have none)."""
    return next((m.message_id for m in reversed(messages) if m.message_id), None)


def reflection_task(messages: Sequence[TranscriptMessage], max_chars: int) -> str:
    """The child's task: the messages as blocks, each text redacted, the newest within
    max_chars."""
    blocks: list[str] = []
    for m in messages:
        text = redact_text(m.content)
        if m.role == "user":
            blocks.append(session_text.block(session_text.USER, text))
        elif m.role == "compaction":
            blocks.append(session_text.block(session_text.SUMMARY, text))
        elif m.role == "tool":
            blocks.append(session_text.block(session_text.TOOL_RESULT, text, m.name or ""))
        else:
            if text.strip():
                blocks.append(session_text.block(session_text.AGENT, text))
            for call in m.tool_calls or ():
                blocks.append(session_text.block(session_text.TOOL_CALL,
                                                 redact_text(call.arguments), call.name))
    return session_text.task_text(user_turns(messages), blocks, max_chars)


class Reflection:
    """The reflection runs of one runner's sessions."""

    def __init__(self, service: MemoryService, memory_enabled: Callable[[Session], bool]) -> None:
        self.service = service
        self.memory_enabled = memory_enabled  # the session's `memory` option
        # The last message each session's reflection was tried through in this opening.
        self._tried: dict[str, str | None] = {}

    def due(self, session: Session) -> bool:
        """Whether session has a reflection to run now (see the module docstring)."""
        reflect, record = self.service.cfg.memory.reflect, session.record
        if not reflect.enable or record.subagent_run or record.mode == "ask":
            return False
        if not self.memory_enabled(session):
            return False
        new = since_reflection(session.messages, record.reflected_through)
        if user_turns(new) < reflect.min_turns:
            return False
        return session.id not in self._tried or self._tried[session.id] != last_id(new)

    def forget(self, session_id: str) -> None:
        """The session was let go or closed: its next opening may try again."""
        self._tried.pop(session_id, None)

    def on_idle(self, session: Session, notify: NotifySession | None) -> bool:
        """The table is about to let session go for idleness: start its reflection when one
        is due, and say so (True: keep it open while it runs)."""
        if not self.due(session):
            return False
        done = anyio.Event()

        async def start() -> None:
            try:
                await self.start(session, notify)
            finally:
                done.set()

        return self.service.spawn(start, done)

    def on_load(self, session: Session, notify: NotifySession | None) -> None:
        """The session was loaded again: a reflection cut short or failed is tried again."""
        self.on_idle(session, notify)

    async def at_close(self, session: Session, notify: NotifySession | None) -> None:
        """The session is being closed: its reflection, when due, starts now; the close's
        bounded wait for memory runs (MemoryService.drain) then covers it."""
        if self.due(session):
            await self.start(session, notify)

    async def start(self, session: Session, notify: NotifySession | None) -> Task | None:
        """Start session's reflection over what it said since the last one; None when the
        bounds are full (a skipped update says so) or it could not start (the log does)."""
        service, memory = self.service, self.service.cfg.memory
        new = since_reflection(session.messages, session.record.reflected_through)
        through = self._tried[session.id] = last_id(new)

        async def send(update: dict[str, Any]) -> None:
            await send_update(service.clock, None if notify is None
                              else partial(notify, session.id), update)

        token = object()  # this run's own hold on the bounds
        if (reason := service.bounds.admit(session.id, token)) is not None:
            log.warning("reflection skipped for %s: %s", session.id, reason)
            await send({"status": "skipped", "reason": reason, "_meta": kind_meta("reflect")})
            return None

        async def succeeded() -> None:
            # Only now: a run that fails, times out or is stopped leaves it where it was.
            session.record.reflected_through = through
            await session.save_record()

        launched: list[Launched] = []
        announced = anyio.Event()  # the started update went out (or never will)

        def on_finish(task: Task) -> None:
            if task.record.status != "succeeded":
                log.warning("reflection %s %s: %s", task.id, task.record.status,
                            run_reason(task.record))
            done = anyio.Event()

            async def settle() -> None:
                try:
                    await announced.wait()  # started before finished, however fast it ended
                    child_id = launched[0].child_id if launched else None
                    await send(finished_update(task.id, child_id, task.record, delivered=False,
                                               kind="reflect"))
                    if launched:
                        await service.retain(session, launched[0].pool)
                finally:
                    done.set()

            service.spawn(settle, done)

        # memory.review: ask with no one to ask: each write is held as a pending change.
        questions = (TurnQuestions(session.id, None, None) if memory.review == "ask" else None)
        try:
            launched.append(await service.launch(
                session, reflection_task(new, memory.reflect.max_chars), on_finish, questions,
                holder=token, reflect=succeeded,
            ))
        except (OSError, PoolRefused) as exc:
            service.bounds.release(session.id, token)
            log.warning("reflection of %s could not start: %s", session.id, exc)
            return None
        finally:
            if not launched:
                announced.set()
        run = launched[0]
        try:
            await send({"status": "started", "taskId": run.task.id,
                        "childSessionId": run.child_id, "_meta": kind_meta("reflect")})
        finally:
            announced.set()
        return run.task
