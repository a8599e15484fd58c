"""The memory runs of one surface as a service of their own: the bounds on runs in flight
(`run_bounds.py`), the search indexes every notes store shares, the memory child started as a
system task, retention (memory.keep_runs, `run_retention.py`) and the wait for running runs
at exit.

The runner owns one and hands it a `MemoryHost`, the few things a run needs of it; the turn's
side of a run (`memory_run.py`) asks the service for everything else.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from acp_memory.clock import Clock
from acp_memory.config import Config, Paths
from acp_memory.engine.turn import TurnEngine, TurnSetup
from acp_memory.hooks.events import SessionHooks, Subagent
from acp_memory.llm.chain import ChainProvider
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.usage import UsageMeter
from acp_memory.memory.history.journal import Journal
from acp_memory.memory.history.records import ChangeSource, change_message
from acp_memory.memory.history.runs import RunCost
from acp_memory.memory.index.indexes import SearchIndexes
from acp_memory.memory.index.keeper import IndexKeeper
from acp_memory.memory.redact import RedactedStream, redact_json, redact_text
from acp_memory.memory.review import Review, TurnQuestions
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore, indexes_for, journal_for
from acp_memory.oserror import os_error_text
from acp_memory.runtime.memory_agent import MemoryLaunch
from acp_memory.runtime.run_bounds import RunBounds
from acp_memory.runtime.run_retention import (
    MEMORY_AGENT_NAME,
    remove_tree,
    retain_runs,
)
from acp_memory.runtime.shared_memory import SharedMemory
from acp_memory.runtime.subagents import log_line, run_child_turn
from acp_memory.sessions.model import new_session_id
from acp_memory.sessions.store import Session
from acp_memory.tasks.admission import PoolRefused
from acp_memory.tasks.log import TaskLog
from acp_memory.tasks.pool import TaskPool
from acp_memory.tasks.records import TaskCost, TaskRecord
from acp_memory.tasks.task import Task, TaskFailed
from acp_memory.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

MEMORY_EXIT_WAIT_SECONDS = 15.0


@dataclass(frozen=True)
class MemoryHost:
    """What a memory run needs of the runner, and nothing more. The runner passes callables
    that read its attributes when called, so a clock or a model lookup replaced later counts."""

    pool_for: Callable[[Session], TaskPool]  # the session's pool: a run is a system task there
    create_child: Callable[..., Session]  # SessionStore.create: the child's bundle (blocking)
    child_hooks: Callable[[Session, Subagent], Awaitable[SessionHooks | None]]
    model_for: Callable[[str], ModelHandle]  # the child's models (never waiting for a reset)
    owner: Callable[[], TaskGroup]  # where bookkeeping runs; raises once the runner stopped
    clock: Callable[[], Clock]  # the bounds' clock: run timeouts, the turn's wait, the exit wait


@dataclass(frozen=True)
class Launched:
    """A memory run that started: its pool, its task and its child session's id."""

    pool: TaskPool
    task: Task
    child_id: str


class MemoryService:
    """The memory runs of one surface: bounds, shared indexes, launch, retention, the exit wait."""

    def __init__(self, cfg: Config, paths: Paths, engine: TurnEngine, host: MemoryHost) -> None:
        self.cfg = cfg
        self.paths = paths
        self.engine = engine  # the parent engine: its templates and its clock
        self.host = host
        # Told of each cwd a session opens in (the background tidy passes, `tidy_run.py`).
        self.on_open: list[Callable[[str], None]] = []
        self.bounds = RunBounds()
        # How long stopping waits for running runs; `draining` is set when that wait begins.
        self.exit_wait_seconds = MEMORY_EXIT_WAIT_SECONDS
        self.draining = anyio.Event()
        self._indexes: SearchIndexes | None = None
        self._journal: Journal | None = None
        self._keeper: IndexKeeper | None = None
        self._running: dict[Task, TaskPool] = {}
        self._bookkeeping: set[anyio.Event] = set()
        # The shared project roots (memory.shared) of the sessions served.
        self.shared = SharedMemory(cfg, paths, host.owner)

    @property
    def clock(self) -> Clock:
        return self.host.clock()

    def indexes(self) -> SearchIndexes:
        """The search indexes every notes store of this surface shares (a root indexed
        once), memory runs or not: the HTTP notes routes use them too."""
        if self._indexes is None:
            self._indexes = indexes_for(self.cfg, self.paths)
            self._keeper = IndexKeeper(self._indexes, self.host.owner)
        return self._indexes

    def open_indexes(self, cwd: str) -> None:
        """A session opened in cwd: bring its roots' indexes up to date in the background,
        so that its memory runs find them ready."""
        indexes = self.indexes()
        roots = Roots.from_config(self.cfg, self.paths, Path(cwd))
        assert self._keeper is not None
        wanted = roots.dirs()
        with contextlib.suppress(RuntimeError):  # no owner: not running (a search builds)
            self._keeper.keep([root for root in wanted if not indexes.ready(root)
                               or root.absolute() in indexes.vectors_behind])
        for opened in self.on_open:
            with contextlib.suppress(RuntimeError):  # no owner: not running
                opened(cwd)

    def open_shared(self, session_id: str, cwd: str) -> None:
        """A session opened in cwd: when its project root is shared, its local copy is kept
        caught up from now on, and an outage or notes not yet imported are said once."""
        if not self.cfg.memory.shared.dsn.strip():
            return
        roots = Roots.from_config(self.cfg, self.paths, Path(cwd))
        self.shared.open(session_id, roots, self.indexes())

    def journal(self) -> Journal:
        """The journal of note changes every store of this surface shares."""
        if self._journal is None:
            self._journal = journal_for(self.cfg, self.paths)
        return self._journal

    def store_for(self, cwd: str, source: ChangeSource) -> MemoryStore:
        """The notes of a session in cwd (the global root and its workspace's) on the shared
        indexes and journal, its changes made by source; the caller closes it."""
        return MemoryStore.from_config(self.cfg, self.paths, Path(cwd), indexes=self.indexes(),
                                       journal=self.journal(), source=source)

    # -- a run's task --------------------------------------------------------------------------

    async def launch(
        self,
        parent: Session,
        text: str,
        on_finish: Callable[[Task], None],
        questions: TurnQuestions | None = None,
        *,
        holder: object,
        reflect: Callable[[], Awaitable[None]] | None = None,
        tidy: Callable[[MemoryStore], MemoryLaunch] | None = None,
    ) -> Launched:
        """Start the memory child on text as a system task of parent's pool; with questions
        (memory.review: ask), its saves and deletes ask the user of the parent's turn first
        (or are held when none can be asked). A reflection run (runtime/reflection.py) passes
        `reflect`, awaited once its child succeeded; a tidy run (runtime/tidy_run.py) passes
        `tidy`, its launch over the run's store. `holder` holds the run's tokens of `bounds`
        (admitted by the caller): they are given back as soon as the run ended, not once its
        records are on disk, so a quick next turn does not find the bound full. on_finish is
        called once its final record is written. Raises OSError or PoolRefused when it cannot
        start (the caller gives the tokens back)."""
        cfg = self.cfg
        pool = self.host.pool_for(parent)
        surface = "tidy" if tidy else "memory_run" if reflect is None else "reflect"
        # The source names the task once it has an id (the body sets it).
        store = self.store_for(parent.record.cwd, ChangeSource(surface, parent.id))
        launch = tidy(store) if tidy else MemoryLaunch.prepare(
            cfg,
            self.engine.templates,
            store,
            message=text,
            session_mode=parent.record.mode,
            session_model_id=parent.record.selected_model_id,
            review=None if questions is None else Review.for_run(store, questions),
            reflect=reflect is not None,
        )
        # The bundle is made with the task's first files, once its id is known: session.json
        # is written once, in the trip that claims the task.
        child_id = new_session_id()
        made: list[Session] = []
        failed: list[str] = []

        def setup(record: TaskRecord) -> None:
            try:
                made.append(self.host.create_child(
                    cwd=parent.record.cwd,
                    model_id=launch.models[0],
                    parent=parent,
                    session_id=child_id,
                    subagent_name=MEMORY_AGENT_NAME,
                    subagent_depth=1,
                    subagent_task_id=record.id,
                    durable=False,  # a record of the run on every turn's path; notes stay synced
                    scrub=redact_json,  # the user's words as a note would keep them
                    prompt=launch.task,  # titled now: its first message rewrites nothing
                ))
            except OSError as exc:  # the run fails saying so (its record says why)
                failed.append(f"cannot create the child session: {os_error_text(exc)}")

        def sealed(record: TaskRecord) -> None:
            # Closing writes the run's read stamps and its cost (`notes log --cost`) to the
            # journal in one unsynced transaction (the cost is in its record, synced by this
            # seal): in this worker trip, not on the event loop, where the journal's lock
            # could keep it waiting.
            store.close(RunCost(record.session_id, record.id, run_cost_of(record).as_json()))

        async def body(task: Task) -> str:
            store.source = ChangeSource(surface, parent.id, task.id, change_message(text))
            meter = UsageMeter()
            task.record.cost = TaskCost()  # a run that ends before any model call cost nothing
            if not made:
                store.close()
                raise TaskFailed(failed[0] if failed else "the child session was not made")
            child = made[0]
            try:
                report = await self._run_child(child, launch, task.log, meter)
                if reflect is not None:
                    await reflect()
                return report
            finally:
                # However it ended (a timeout, a stop, a failure): what its calls cost so far.
                task.record.cost = run_cost(meter)
                child.close()  # the store closes once the run is sealed (`sealed`)

        # Every file of the run (log, record, the child's bundle) is redacted as a note is:
        # the HTTP API and the Tasks drawer serve them. The label is cut as a log line is:
        # redacted first, so that no secret is kept in part. Its few short lines go to its
        # file on the event loop (TaskLog's inline).
        task_log = pool.new_log(RedactedStream(), inline=True)
        try:
            task = await pool.start_agent(
                label=f"memory: {log_line(task_log, text)}",
                agent_name=MEMORY_AGENT_NAME,
                child_session_id=child_id,
                body=body,
                system=True,
                timeout_seconds=cfg.memory.timeout_seconds,
                on_finish=on_finish,
                log=task_log,
                redact=redact_text,
                setup=setup,
                on_sealed=sealed,
            )
        except PoolRefused:
            store.close()
            for child in made:  # claimed, then refused: the pool closed meanwhile
                child.close()
                await anyio.to_thread.run_sync(remove_tree, child.dir)
            raise
        self._running[task] = pool
        task.add_done_callback(self._ended)  # at once when it has already
        task.add_ended_callback(lambda _: self.bounds.release(parent.id, holder))
        return Launched(pool, task, child_id)

    def _ended(self, task: Task) -> None:
        self._running.pop(task, None)

    async def _run_child(
        self, child: Session, launch: MemoryLaunch, task_log: TaskLog, meter: UsageMeter
    ) -> str:
        handles = [self.host.model_for(model_id) for model_id in launch.models]
        # The chain sets each request's model, max_tokens (capped) and sampling itself; the
        # meter counts every answer it gives, a fallback model's included.
        chain = ChainProvider(handles, self.cfg.memory.copilot_max_tokens)
        model = meter.wrap(ModelHandle(handles[0].model_id, chain, handles[0].config))
        # Its own engine: the memory templates, no registry tools (the set comes with the
        # launch), the parent engine's clock.
        engine = TurnEngine(
            launch.templates, ToolRegistry(), launch.max_turns, clock=self.engine.clock
        )
        # Hooks fire inside the child as in any turn, its payloads saying "kind": "memory".
        subagent = Subagent(MEMORY_AGENT_NAME, child.id, "memory")
        setup = TurnSetup(
            tools=launch.tools,
            max_turns=launch.max_turns,
            template=launch.template,
            hooks=await self.host.child_hooks(child, subagent),
        )
        return await run_child_turn(
            engine, child, launch.task, model, setup, task_log, report_of=final_message
        )

    # -- after a run ---------------------------------------------------------------------------

    async def retain(self, session: Session, pool: TaskPool) -> None:
        """memory.keep_runs: the oldest finished memory runs of session beyond it go, record
        and child bundle alike."""
        await retain_runs(session, pool, self.cfg.memory.keep_runs)

    def spawn(self, work: Callable[[], Coroutine[Any, Any, None]], done: anyio.Event) -> bool:
        """Start a run's bookkeeping in the owner group (False once the runner stopped);
        `done` is set when it ends, and `settled()` waits for it."""
        try:
            self.host.owner().start_soon(work)
        except RuntimeError:
            return False
        self._bookkeeping = {e for e in self._bookkeeping if not e.is_set()} | {done}
        return True

    async def settled(self) -> None:
        """Wait until the bookkeeping of every run ended (a delivery line starts its
        retention before it ends, so none is missed)."""
        while pending := [e for e in self._bookkeeping if not e.is_set()]:
            await pending[0].wait()

    # -- the surface's end ---------------------------------------------------------------------

    async def drain(self, session_id: str | None = None) -> None:
        """Wait up to exit_wait_seconds for the running memory runs, or those of session_id
        (a surface calls it before it closes sessions, whose pools would stop them)."""
        running = [  # a closed pool already stops its runs
            task
            for task, pool in self._running.items()
            if not pool.closed and session_id in (None, pool.session_id)
        ]
        if not running:
            return
        self.draining.set()
        log.info("waiting up to %gs for %d memory run(s)", self.exit_wait_seconds, len(running))
        with self.clock.move_on_after(self.exit_wait_seconds):
            for task in running:
                await task.done.wait()

    def close(self) -> None:
        """The runner stopped: no run is in flight any more, the indexes close."""
        self._running.clear()
        self.shared.close()
        self.bounds = RunBounds(self.bounds.session_limit, int(self.bounds.process.total_tokens))
        if self._indexes is not None:
            self._indexes.close()
            self._indexes = None
            self._keeper = None
        if self._journal is not None:
            self._journal.close()
            self._journal = None


def run_cost(meter: UsageMeter) -> TaskCost:
    """A run's cost as its record keeps it; its time is the record's (set as it is sealed)."""
    return TaskCost(
        model_calls=meter.model_calls,
        input_tokens=meter.input_tokens,
        output_tokens=meter.output_tokens,
        cached_read_tokens=meter.cache_read_tokens,
        cached_write_tokens=meter.cache_write_tokens,
    )


def run_cost_of(record: TaskRecord) -> TaskCost:
    """What a settled run cost; a run that never reached its body cost nothing."""
    return record.cost or TaskCost(duration_ms=record.duration_ms())


def final_message(child: Session) -> str:
    """The child's report: the text of the message that ended its turn. Narration beside
    tool calls is not a report, so a child that ran out of rounds, or ended on an empty
    answer, has none."""
    last = child.messages[-1] if child.messages else None
    if last is None or last.role != "assistant" or last.tool_calls:
        return ""
    return last.content.strip()
