"""The memory run of a user turn, as the turn sees it: the memory subagent as a system task of
the session's pool, its report for the turn's steps, and the memory_run updates a surface hears.

Every user turn of an ordinary session with memory.enable starts one run once the message is
accepted. The run is a child session (bundle under the parent's `subagents/`) on its own
engine, with the memory tools and nothing else. The turn waits a bounded time for its report
before the first model call; a report in by then rides in the turn context of every step, one
that lands later joins from the next step, and nothing is carried into the next turn.

The run lives in the pool (the runner's owner group), not in the turn: a cancelled turn stops
waiting, never the run. Its task log ends with what it cost and one line saying what became
of the report; its cost is journaled too (`notes log --cost`). The bounds, the launch and
retention belong to the memory service (`memory_service.py`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, Literal

import anyio

from acp_memory.clock import Clock
from acp_memory.engine.prompt import TurnContext
from acp_memory.engine.turn import TurnContextSource
from acp_memory.memory.redact import redact_text
from acp_memory.memory.review import TurnQuestions
from acp_memory.runtime.memory_service import MemoryService, run_cost_of
from acp_memory.sessions.store import Session
from acp_memory.tasks.admission import PoolRefused
from acp_memory.tasks.pool import TaskPool
from acp_memory.tasks.records import LOG_FILE, TaskRecord, task_dir
from acp_memory.tasks.task import Task

log = logging.getLogger(__name__)

# A surface that is told the run's news: the update without its session tag.
NotifyMemory = Callable[[dict[str, Any]], Awaitable[None]]
# What started a run: a user turn, a session let go or closed (runtime/reflection.py), or
# `/memory tidy` (runtime/tidy_run.py).
RunKind = Literal["turn", "reflect", "tidy"]
# How long the end of a turn waits for its own memory updates to go out (a stuck client
# must not hold the prompt's answer for ever).
SEND_BOUND_SECONDS = 5.0


def run_reason(record: TaskRecord) -> str:
    """Why a run that did not succeed ended, as its finished update says it: the provider's
    failure, `timed out after 300s`, or `stopped`."""
    if record.status == "timed_out":
        return f"timed out after {record.timeout_seconds or 0:g}s"
    if record.status == "stopped":
        return "stopped"
    return record.error or record.status


async def send_update(clock: Clock, notify: NotifyMemory | None, update: dict[str, Any]) -> None:
    """Tell the surface a memory_run update, bounded by SEND_BOUND_SECONDS: the end of a turn
    sends shielded, and a client that stopped reading (its outbox full) must not keep a turn
    or a run alive; the client's trouble fails neither."""
    if notify is None:
        return
    with clock.move_on_after(SEND_BOUND_SECONDS) as bound:
        try:
            await notify(update)
        except Exception as exc:
            log.warning("cannot send the memory_run update: %s", exc)
    if bound.cancelled_caught:
        log.warning("memory_run update not sent: the client did not take it in %gs",
                    SEND_BOUND_SECONDS)


def kind_meta(kind: RunKind) -> dict[str, Any]:
    """The `_meta` of a started or skipped memory_run update: what started the run (the
    finished one adds its cost beside it)."""
    return {"acpMemory": {"kind": kind}}


def finished_update(
    task_id: str,
    child_session_id: str | None,
    record: TaskRecord,
    *,
    delivered: bool,
    kind: RunKind = "turn",
) -> dict[str, Any]:
    """The memory_run update of a settled run (the runner's and print mode's alike), with
    what it cost and its kind (a turn's run, or a reflection) in `_meta.acpMemory`."""
    update: dict[str, Any] = {
        "status": "finished",
        "taskId": task_id,
        "childSessionId": child_session_id,
        "taskStatus": record.status,
        "durationMs": record.duration_ms(),
        "delivered": delivered,
    }
    if record.status != "succeeded":
        update["reason"] = run_reason(record)
    update["_meta"] = {"acpMemory": {**run_cost_of(record).as_json(), "kind": kind}}
    return update


def run_usage(update: dict[str, Any] | None) -> dict[str, Any] | None:
    """The turn's memory run for the prompt answer's `_meta`, from the last memory_run update
    the turn heard: its task and status, and once finished its `usage`; None without a run."""
    if update is None or update.get("status") not in ("started", "finished"):
        return None
    run: dict[str, Any] = {"taskId": update["taskId"],
                           "taskStatus": update.get("taskStatus", "running")}
    if (tokens := run_tokens(update)) is not None:
        run["usage"] = tokens
    return run


def run_tokens(update: dict[str, Any] | None) -> dict[str, int] | None:
    """What a finished run cost (its finished update's `_meta`), its tokens in ACP's `Usage`
    shape beside its calls and time: a second conversation, counted apart from the turn's."""
    if update is None or update.get("status") != "finished":
        return None
    cost = {k: v for k, v in update["_meta"]["acpMemory"].items() if k != "kind"}
    return {**cost, "totalTokens": cost["inputTokens"] + cost["outputTokens"]}


class MemoryRun:
    """The turn's side of one memory run: starts it, waits for it, hands its report to the
    steps, and tells the surface (started, finished, skipped)."""

    def __init__(
        self,
        service: MemoryService,
        session: Session,
        text: str,
        notify: NotifyMemory | None,
        inner: TurnContextSource,
        questions: TurnQuestions | None = None,
    ) -> None:
        self.service = service
        # memory.review: ask: the run's writes are asked about while the turn runs.
        self.questions = questions
        self.session = session
        self.text = text
        self.notify = notify
        self.inner = inner
        self.task: Task | None = None
        self.pool: TaskPool | None = None  # the pool the run went to
        self.child_id = ""
        self.report: str | None = None
        self.delivered_at: str | None = None  # "first request" or "a later step"
        self.skipped: str | None = None  # why the run did not start
        self._steps = 0
        self._finished_sent = False
        self._pending: list[anyio.Event] = []

    # -- the turn's context source ---------------------------------------------------------

    async def begin(self) -> None:
        await self.inner.begin()
        task = self.task = await self._start()
        # min(wait_seconds, the run's timeout): a run past its timeout is done, ending the wait.
        wait = self.service.cfg.memory.wait_seconds
        if task is None or wait <= 0:
            return
        try:
            with self.service.clock.move_on_after(wait):
                # Its outcome, not its final record on disk: the report is in memory by then.
                await task.ended.wait()
        except anyio.get_cancelled_exc_class():
            if not task.ended.is_set():
                with anyio.CancelScope(shield=True):
                    await task.log.write(
                        "\n[the turn was cancelled and stopped waiting; the memory run goes on]\n"
                    )
            raise

    def step(self) -> TurnContext:
        context = self.inner.step()
        task = self.task
        if self.report is None and task is not None and task.ended.is_set():
            if report := report_of(task):
                self.report = report
                self.delivered_at = "first request" if self._steps == 0 else "a later step"
                self._finished_sent = True
                self._spawn(self._settled(task, delivered=True))
        self._steps += 1
        if self.report is not None:
            context.memory_report = self.report
        return context

    async def _turn_ended(self) -> None:
        """A review question still open withdrawn (its change held), then the updates on
        their way sent (each bounded)."""
        if self.questions is not None:
            await self.questions.close()
        with anyio.move_on_after(SEND_BOUND_SECONDS):
            for event in list(self._pending):
                await event.wait()

    async def end_turn(self) -> None:
        """At the end of the turn, shielded by the caller: the updates still on their way go
        out, and a run that settled without delivering says so now. A review question
        still open is withdrawn first (its change held)."""
        await self._turn_ended()
        task = self.task
        if task is None:
            return
        if task.ended.is_set():
            if not self._finished_sent:
                self._finished_sent = True
                await self._settled(task, delivered=False)
        else:
            # Its fate is known when it settles; the turn's stream is gone by then.
            task.add_done_callback(lambda t: self._spawn(self._write_fate(t)))

    async def reply(self) -> str:
        """A run whose report is a command's reply (/remember, /forget) rather than a turn's
        context: started as a turn's is, awaited to its end (its timeout bounds it), then
        its report, or one line saying why there is none."""
        task = self.task = await self._start()
        if task is None:
            return f"No memory run: {self.skipped}."
        try:
            await task.done.wait()
            if report := report_of(task):
                self.report = report
                self.delivered_at = "as the command's reply"
                self._finished_sent = True
                await self._settled(task, delivered=True)
        finally:
            with anyio.CancelScope(shield=True):
                await self.end_turn()
        if self.report is not None:
            return self.report
        if task.record.status == "succeeded":
            return "The memory run produced no report."
        return f"The memory run {task.record.status}: {run_reason(task.record)}."

    # -- starting ----------------------------------------------------------------------------

    async def _start(self) -> Task | None:
        service, session_id = self.service, self.session.id
        # Admitted before the first await, so turns of other sessions starting at the same
        # time see it; its task's end (or a start that failed) gives its tokens back.
        if (reason := service.bounds.admit(session_id, self)) is not None:
            log.warning("memory run skipped for %s: %s", session_id, reason)
            self.skipped = reason
            await self._send({"status": "skipped", "reason": reason,
                              "_meta": kind_meta("turn")})
            return None
        started = False
        try:
            launched = await service.launch(self.session, self.text, self._on_finish,
                                            self.questions, holder=self)
            started = True
        except (OSError, PoolRefused) as exc:
            # Not a bound: the log says why, the wire says nothing (skipped is the bounds').
            reason = f"the memory run could not start: {exc}"
            log.warning("memory run skipped for %s: %s", session_id, reason)
            self.skipped = reason
            return None
        finally:
            if not started:
                service.bounds.release(session_id, self)
        self.pool, self.task, self.child_id = launched.pool, launched.task, launched.child_id
        task = self.task
        await self._send({"status": "started", "taskId": task.id, "childSessionId": self.child_id,
                          "_meta": kind_meta("turn")})
        return task

    # -- settling ----------------------------------------------------------------------------

    def _on_finish(self, task: Task) -> None:
        record = task.record
        if record.status != "succeeded":
            log.warning("memory run %s %s: %s", task.id, record.status, run_reason(record))

    async def _settled(self, task: Task, *, delivered: bool) -> None:
        update = finished_update(task.id, self.child_id, task.record, delivered=delivered)
        # The line and the update side by side: a client slow to read must not cost the log
        # its last line, nor the session its retention, and the update must not wait on the
        # disk (it reaches the editor before the answer that used the report).
        async with anyio.create_task_group() as both:
            both.start_soon(self._write_fate, task)
            await self._send(update)

    async def _write_fate(self, task: Task) -> None:
        """The log's last line: what became of the report (written once, after settling)."""
        record = task.record
        if self.delivered_at is not None:
            line = f"report delivered to the turn ({self.delivered_at})"
        elif record.status == "succeeded":
            if report_of(task):
                line = "turn ended before the report"
            else:
                line = "nothing delivered: the run produced no final message"
        elif record.status == "timed_out":
            line = f"nothing delivered: the run {run_reason(task.record)}"  # timed out after 300s
        elif record.status == "stopped":
            line = "nothing delivered: the run was stopped"
        else:
            line = f"nothing delivered: the run failed: {run_reason(task.record)}"
        cost = run_cost_of(record)
        path = task_dir(self.session.dir, task.id) / LOG_FILE
        try:
            # Two short lines, never synced: cheaper on the event loop than a worker-thread
            # trip. Its cost was journaled with its final record (MemoryService).
            _append_lines(path, [f"cost: {cost.describe()}", redact_text(line)])
        except OSError as exc:
            log.warning("cannot write the delivery line of %s: %s", task.id, exc)
        # Only now, and once its final record is written (the answer does not wait for the
        # disk): the run that just ended may itself be the oldest one retention removes.
        if (pool := self.pool) is not None:
            task.add_done_callback(lambda _: self._spawn(self.service.retain(self.session, pool)))

    # -- plumbing ----------------------------------------------------------------------------

    async def _send(self, update: dict[str, Any]) -> None:
        await send_update(self.service.clock, self.notify, update)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run work in the owner group (step() and done callbacks cannot await); end_turn
        waits for what was spawned before the turn's answer."""
        done = anyio.Event()
        self._pending.append(done)

        async def run() -> None:
            # Shielded and bounded: a run stopped as the agent stops still gets its last
            # line, and a stuck client cannot hold the stop.
            with anyio.CancelScope(shield=True) as scope:
                scope.deadline = anyio.current_time() + SEND_BOUND_SECONDS
                try:
                    await work
                except Exception:
                    log.exception("memory run bookkeeping failed")
                finally:
                    done.set()

        if not self.service.spawn(run, done):  # the runner stopped: nothing left to tell
            work.close()
            done.set()


def report_of(task: Task) -> str:
    """The report of a settled run: a succeeded run's final message, else nothing."""
    return (task.result or "").strip() if task.record.status == "succeeded" else ""


def _append_lines(path: Path, lines: list[str]) -> None:
    # One write through a bare descriptor: the text layer's buffer and codec set-up cost
    # more than these few bytes.
    data = "".join(f"{line}\n" for line in lines).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
