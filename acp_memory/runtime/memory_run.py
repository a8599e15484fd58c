"""The memory run of a user turn: the memory subagent as a system task of the session's pool.

Every user turn of an ordinary session with memory.enable starts one run once the message is
accepted. The run is a child session (bundle under the parent's `subagents/`) on its own
engine, with the memory tools and nothing else. The turn waits a bounded time for its report
before the first model call; a report in by then rides in the turn context of every step, one
that lands later joins from the next step, and nothing is carried into the next turn.

The run lives in the pool (the runner's owner group), not in the turn: a cancelled turn stops
waiting, never the run. Its task log ends with one line saying what became of the report.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from acp_memory.engine.prompt import TurnContext
from acp_memory.engine.turn import TurnContextSource, TurnEngine, TurnSetup
from acp_memory.hooks.events import Subagent
from acp_memory.llm.provider import closing
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import ChatRequest, LLMError, StreamEvent
from acp_memory.memory.redact import RedactedStream, redact_json, redact_text
from acp_memory.memory.store import MemoryStore
from acp_memory.runtime.memory_agent import MemoryLaunch
from acp_memory.runtime.subagents import first_line, run_child_turn
from acp_memory.sessions.model import new_session_id
from acp_memory.sessions.store import Session
from acp_memory.tasks.log import TaskLog
from acp_memory.tasks.pool import PoolRefused, Task, TaskFailed, TaskPool
from acp_memory.tasks.records import LOG_FILE, TaskRecord, task_dir
from acp_memory.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from acp_memory.runtime.runner import SessionRunner

log = logging.getLogger(__name__)

MEMORY_AGENT_NAME = "memory"
# Turns of a session are serialised, so runs overlap only when turns end faster than runs.
SESSION_RUNS_IN_FLIGHT = 2
PROCESS_RUNS_IN_FLIGHT = 16
# A surface that is told the run's news: the update without its session tag.
NotifyMemory = Callable[[dict[str, Any]], Awaitable[None]]
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


class ChainProvider:
    """The memory model chain as one provider: a call that failed before any output moves on
    to the next model; one that broke after output is not retried here (never stream twice).
    The first model that answered is kept for the rest of the run."""

    def __init__(self, handles: list[ModelHandle], max_tokens: int) -> None:
        self.handles = handles
        self.max_tokens = max_tokens
        self.name = "memory chain"
        self._at = 0

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        last: LLMError | None = None
        for index in range(self._at, len(self.handles)):
            handle = self.handles[index]
            cfg = handle.config
            ask = replace(
                request,
                model=cfg.upstream_id,
                max_tokens=min(cfg.max_tokens, self.max_tokens),
                temperature=cfg.temperature,
                stream=cfg.stream,
            )
            produced = False
            try:
                # Closed on the way out (a cancel, a stop, a timeout), so that its HTTP stream
                # stops at once rather than when the garbage collector finds it.
                events = handle.stream(ask)
                async with closing(events):
                    async for event in events:
                        produced = True
                        yield event
                self._at = index
                return
            except LLMError as err:
                if produced or err.after_output:
                    raise
                log.warning("memory model %s failed before any output: %s", handle.model_id, err)
                last = err
        assert last is not None
        raise last


class MemoryRun:
    """The turn's side of one memory run: starts it, waits for it, hands its report to the
    steps, and tells the surface (started, finished, skipped)."""

    def __init__(
        self,
        runner: SessionRunner,
        session: Session,
        text: str,
        notify: NotifyMemory | None,
        inner: TurnContextSource,
    ) -> None:
        self.runner = runner
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
        wait = self.runner.cfg.memory.wait_seconds
        if task is None or wait <= 0:
            return
        try:
            with self.runner.clock.move_on_after(wait):
                await task.done.wait()
        except anyio.get_cancelled_exc_class():
            if not task.done.is_set():
                with anyio.CancelScope(shield=True):
                    await task.log.write(
                        "\n[the turn was cancelled and stopped waiting; the memory run goes on]\n"
                    )
            raise

    def step(self) -> TurnContext:
        context = self.inner.step()
        task = self.task
        if self.report is None and task is not None and task.done.is_set():
            if report := _report_of(task):
                self.report = report
                self.delivered_at = "first request" if self._steps == 0 else "a later step"
                self._finished_sent = True
                self._spawn(self._settled(task, delivered=True))
        self._steps += 1
        if self.report is not None:
            context.memory_report = self.report
        return context

    async def end_turn(self) -> None:
        """At the end of the turn, shielded by the caller: the updates still on their way go
        out, and a run that settled without delivering says so now."""
        with anyio.move_on_after(SEND_BOUND_SECONDS):
            for event in list(self._pending):
                await event.wait()
        task = self.task
        if task is None:
            return
        if task.done.is_set():
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
            if report := _report_of(task):
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
        runner = self.runner
        runs = runner.memory_runs
        session_id = self.session.id
        mine = runs.get(session_id, set())
        total = sum(len(s) for s in runs.values())
        reason = None
        if len(mine) >= runner.memory_session_limit:
            reason = (
                f"memory runs in flight for this session: {len(mine)} of "
                f"{runner.memory_session_limit}"
            )
        elif total >= runner.memory_process_limit:
            reason = (
                f"memory runs in flight for this process: {total} of {runner.memory_process_limit}"
            )
        if reason is not None:
            log.warning("memory run skipped for %s: %s", session_id, reason)
            self.skipped = reason
            await self._send({"status": "skipped", "reason": reason})
            return None
        # Counted before the first await, so turns of other sessions starting at the same
        # time see it; its task's end (or a start that failed) takes it out.
        runs.setdefault(session_id, set()).add(self)
        try:
            task = await self._launch()
        except (OSError, PoolRefused) as exc:
            # Not a bound: the log says why, the wire says nothing (skipped is the bounds').
            reason = f"the memory run could not start: {exc}"
            log.warning("memory run skipped for %s: %s", session_id, reason)
            self.skipped = reason
            return None
        finally:
            if self.task is None:
                self._leave()
        await self._send({"status": "started", "taskId": task.id, "childSessionId": self.child_id})
        return task

    async def _launch(self) -> Task:
        runner = self.runner
        cfg = runner.cfg
        parent = self.session
        pool = self.pool = runner.pool_for(parent)
        store = MemoryStore.from_config(
            cfg, runner.paths, Path(parent.record.cwd), indexes=runner.memory_indexes()
        )
        launch = MemoryLaunch.prepare(
            cfg,
            runner.engine.templates,
            store,
            message=self.text,
            session_mode=parent.record.mode,
            session_model_id=parent.record.selected_model_id,
        )

        # The bundle is made by the task, once its id is known: session.json is written once.
        self.child_id = child_id = new_session_id()

        async def body(task: Task) -> str:
            create = partial(
                runner.store.create,
                cwd=parent.record.cwd,
                model_id=launch.models[0],
                parent=parent,
                session_id=child_id,
                subagent_name=MEMORY_AGENT_NAME,
                subagent_depth=1,
                subagent_task_id=task.id,
                durable=False,  # a record of the run on every turn's path; notes stay synced
                scrub=redact_json,  # the user's words as a note would keep them
            )
            try:
                child = await anyio.to_thread.run_sync(create)
            except OSError as exc:
                store.close()
                raise TaskFailed(f"cannot create the child session: {exc}") from None
            try:
                return await self._run_child(child, launch, task.log)
            finally:
                child.close()
                store.close()

        try:
            # Every file of the run (log, record, the child's bundle) is redacted as a note
            # is: the HTTP API and the Tasks drawer serve them. The label is redacted before
            # it is cut, so that no secret is kept in part.
            self.task = await pool.start_agent(
                label=f"memory: {first_line(redact_text(first_line(self.text, 1000)))}",
                agent_name=MEMORY_AGENT_NAME,
                child_session_id=child_id,
                body=body,
                system=True,
                counted=False,
                agent_system=True,
                timeout_seconds=cfg.memory.timeout_seconds,
                on_finish=self._on_finish,
                log=pool.new_log(RedactedStream()),
                redact=redact_text,
            )
        except PoolRefused:
            store.close()
            raise
        return self.task

    async def _run_child(self, child: Session, launch: MemoryLaunch, task_log: TaskLog) -> str:
        runner = self.runner
        cfg = runner.cfg
        handles = [runner.child_model_for(model_id) for model_id in launch.models]
        # The chain sets each request's model, max_tokens (capped) and sampling itself.
        chain = ChainProvider(handles, cfg.memory.copilot_max_tokens)
        model = ModelHandle(handles[0].model_id, chain, handles[0].config)
        # Its own engine: the memory templates, no registry tools (the set comes with the
        # launch), the parent engine's clock.
        engine = TurnEngine(
            launch.templates, ToolRegistry(), launch.max_turns, clock=runner.engine.clock
        )
        # Hooks fire inside the child as in any turn, its payloads saying "kind": "memory".
        subagent = Subagent(MEMORY_AGENT_NAME, child.id, "memory")
        setup = TurnSetup(
            tools=launch.tools,
            max_turns=launch.max_turns,
            template=launch.template,
            hooks=await runner.hooks.for_child(child, subagent),
        )
        return await run_child_turn(
            engine, child, launch.task, model, setup, task_log, report_of=final_message
        )

    # -- settling ----------------------------------------------------------------------------

    def _on_finish(self, task: Task) -> None:
        self._leave()
        record = task.record
        if record.status != "succeeded":
            log.warning("memory run %s %s: %s", task.id, record.status, run_reason(record))

    def _leave(self) -> None:
        """No longer in flight: out of the runner's count."""
        runs = self.runner.memory_runs
        mine = runs.get(self.session.id)
        if mine is not None:
            mine.discard(self)
            if not mine:
                del runs[self.session.id]

    async def _settled(self, task: Task, *, delivered: bool) -> None:
        update: dict[str, Any] = {
            "status": "finished",
            "taskId": task.id,
            "childSessionId": self.child_id,
            "taskStatus": task.record.status,
            "durationMs": _duration_ms(task),
            "delivered": delivered,
        }
        if task.record.status != "succeeded":
            update["reason"] = run_reason(task.record)
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
            if _report_of(task):
                line = "turn ended before the report"
            else:
                line = "nothing delivered: the run produced no final message"
        elif record.status == "timed_out":
            line = f"nothing delivered: the run {run_reason(task.record)}"  # timed out after 300s
        elif record.status == "stopped":
            line = "nothing delivered: the run was stopped"
        else:
            line = f"nothing delivered: the run failed: {run_reason(task.record)}"
        path = task_dir(self.session.dir, task.id) / LOG_FILE
        try:
            await anyio.to_thread.run_sync(_append_line, path, redact_text(line))
        except OSError as exc:
            log.warning("cannot write the delivery line of %s: %s", task.id, exc)
        # Only now: the run that just ended may itself be the oldest one retention removes.
        self._spawn(self._retain())

    async def _retain(self) -> None:
        """memory.keep_runs: the oldest finished memory runs beyond it go, record and child
        bundle alike."""
        keep = self.runner.cfg.memory.keep_runs
        # The run's own pool, never a new one: a pool closed since (the session deleted or
        # released) leaves the bundle alone, and its next run's retention catches up.
        pool = self.pool
        if keep <= 0 or pool is None or pool.closed:
            return
        try:
            records = await pool.list(include_system=True)
        except OSError as exc:
            log.warning("cannot list the memory runs of %s: %s", self.session.id, exc)
            return
        finished = [
            r
            for r in records
            if r.system
            and r.agent is not None
            and r.agent.name == MEMORY_AGENT_NAME
            and r.status not in ("queued", "running")
        ]
        for record in finished[: max(len(finished) - keep, 0)]:
            try:
                await pool.remove(record.id)
            except (ValueError, LookupError, OSError):
                continue
            assert record.agent is not None
            child_dir = self.session.subagents_dir() / record.agent.session_id
            await anyio.to_thread.run_sync(_remove_tree, child_dir)

    # -- plumbing ----------------------------------------------------------------------------

    async def _send(self, update: dict[str, Any]) -> None:
        if self.notify is None:
            return
        # Bounded: the end of a turn sends shielded, and a client that stopped reading (its
        # outbox full) must not keep the turn alive past a cancel.
        with self.runner.clock.move_on_after(SEND_BOUND_SECONDS) as bound:
            try:
                await self.notify(update)
            except Exception as exc:  # the client's trouble must not fail a turn or a run
                log.warning("cannot send the memory_run update: %s", exc)
        if bound.cancelled_caught:
            log.warning("memory_run update not sent: the client did not take it in %gs",
                        SEND_BOUND_SECONDS)

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

        try:
            self.runner.owner.start_soon(run)
        except RuntimeError:  # the runner stopped: nothing left to tell
            work.close()
            done.set()


def final_message(child: Session) -> str:
    """The child's report: the text of the message that ended its turn. Narration beside
    tool calls is not a report, so a child that ran out of rounds, or ended on an empty
    answer, has none."""
    last = child.messages[-1] if child.messages else None
    if last is None or last.role != "assistant" or last.tool_calls:
        return ""
    return last.content.strip()


def _report_of(task: Task) -> str:
    """The report of a settled run: a succeeded run's final message, else nothing."""
    return (task.result or "").strip() if task.record.status == "succeeded" else ""


def _duration_ms(task: Task) -> int:
    seconds = task.record.elapsed_seconds()
    return max(int((seconds or 0) * 1000), 0)


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _append_line(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(f"{line}\n")
