"""The background pool of one session: bounded, timed, recorded in the bundle.

Every task runs in the owner task group (the session runner's), never as a loose task: it
ends with its session, when the surface drains, or at its hard limit, and its process group
goes with it. Records and logs are written in worker threads, so no session waits on another's
disk. A finished task is announced once, as one line, to the session's next model step.

System tasks (the memory run) are the agent's own: admitted past `max_concurrent` and not
counted against it, run even with background tasks turned off, never announced, and hidden
from the model's pool tools (which refuse their ids).
"""

from __future__ import annotations

import builtins
import logging
import shutil
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from acp_memory.atomic import write_json_atomic
from acp_memory.clock import Clock
from acp_memory.editor import Editor
from acp_memory.tasks.log import TaskLog, TextFilter, clean_output, last_lines, read_file_tail
from acp_memory.tasks.process import KILL_GRACE_SECONDS, CommandProcess, start_process
from acp_memory.tasks.records import (
    LOG_FILE,
    META_FILE,
    AgentRef,
    Kind,
    Status,
    TaskRecord,
    abandon_task,
    claim_task,
    format_seconds,
    read_task,
    read_tasks,
    release_task,
    task_dir,
    task_number,
    utc_now,
)

if TYPE_CHECKING:
    from acp_memory.config.models import ToolsConfig

log = logging.getLogger(__name__)

# A model's hard limit from its own estimate: three times what it expects, never under this.
EXPECTED_FLOOR_SECONDS = 60.0
# Enough raw bytes to fill a model's view even after escape sequences are dropped.
MIN_READ_BYTES = 64 * 1024


def read_budget(chars: int) -> int:
    """Raw log bytes to read for a view of `chars` characters: escape sequences and redraws
    the view drops take room too."""
    return max(MIN_READ_BYTES, chars * 8)


@dataclass(frozen=True)
class PoolSettings:
    """tools.background and tools.output_limits, plus the kill grace (tests shorten it)."""

    enabled: bool = True
    max_concurrent: int = 5
    default_timeout_seconds: float = 900
    max_timeout_seconds: float = 3600
    log_bytes: int = 10 * 1024 * 1024
    output_chars: int = 30_000
    kill_grace_seconds: float = KILL_GRACE_SECONDS

    @classmethod
    def from_config(cls, tools: ToolsConfig, **overrides: Any) -> PoolSettings:
        bg, limits = tools.background, tools.output_limits
        settings = cls(
            enabled=bg.enabled,
            max_concurrent=bg.max_concurrent,
            default_timeout_seconds=bg.default_timeout_seconds,
            max_timeout_seconds=bg.max_timeout_seconds,
            log_bytes=limits.log_bytes,
            output_chars=limits.tool_output_chars,
        )
        return replace(settings, **overrides)

    def hard_limit(
        self, timeout_seconds: float | None = None, expected_seconds: float | None = None
    ) -> float:
        """A task's hard limit: the explicit timeout, else 3 × expected_seconds floored at
        60 s, else the default; never past max_timeout_seconds."""
        if timeout_seconds is not None:
            limit = timeout_seconds
        elif expected_seconds is not None:
            limit = max(3 * expected_seconds, EXPECTED_FLOOR_SECONDS)
        else:
            limit = self.default_timeout_seconds
        return min(limit, self.max_timeout_seconds)


class PoolRefused(Exception):
    """The pool does not take this task now; the message says why, for a model to read."""


class TaskFailed(Exception):
    """Raised by a task's body to fail it with exactly this reason (no exception type in
    front), e.g. a provider's status and words."""


class UnknownTask(LookupError):
    """No task of this session has that id."""

    def __init__(self, task_id: str) -> None:
        super().__init__(
            f"there is no background task {task_id!r} in this session "
            "(background_list shows them)"
        )
        self.task_id = task_id


@dataclass(frozen=True)
class _Outcome:
    status: Status
    error: str | None = None


Body = Callable[["Task"], Awaitable[_Outcome]]


class Task:
    """A task of this process: its record (kept current), log, end event and outcome."""

    def __init__(
        self, record: TaskRecord, log: TaskLog, *, counted: bool, kind_limit: int | None
    ) -> None:
        self.record = record
        self.log = log
        self.counted = counted and not record.system
        self.kind_limit = kind_limit
        self.done = anyio.Event()  # set once it ended and its final record is written
        self.result: str | None = None  # an agent task's report
        self.process: CommandProcess | None = None
        self._scope = anyio.CancelScope()
        self._stop_reason: str | None = None
        self._admitted = anyio.Event()
        self._t0 = 0.0  # the pool clock's time when it started running
        self._callbacks: list[Callable[[Task], None]] = []
        self._writing = anyio.Lock()
        self._claim: int | None = None  # holds the folder's lock until the record is final
        self.redact: Callable[[str], str] | None = None  # of the record's error, if set

    @property
    def id(self) -> str:
        return self.record.id

    def snapshot(self) -> TaskRecord:
        """The record as of now (output counters included), a copy."""
        return self.record.model_copy(
            update={"output_bytes": self.log.total, "output_truncated": self.log.truncated}
        )

    def add_done_callback(self, callback: Callable[[Task], None]) -> None:
        """Call callback(task) once it is done (at once if it already is)."""
        if self.done.is_set():
            _call(callback, self)
        else:
            self._callbacks.append(callback)


class TaskPool:
    """The background tasks of one session, run in `owner`, recorded under `bundle`."""

    def __init__(
        self,
        owner: TaskGroup,
        session_id: str,
        bundle: Path,
        settings: PoolSettings | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.owner = owner
        self.session_id = session_id
        self.bundle = bundle
        self.settings = settings or PoolSettings()
        self.clock = clock or Clock()  # what hard limits are measured on
        self.closed = False
        # Tasks of this pool, running or finished; every other record is read from the bundle
        # when asked for, so another process's (or pool's) tasks are seen as they are now.
        self._tasks: dict[str, Task] = {}
        self._next = 1  # where the next id is looked for: ids never go back in this pool
        self._queue: deque[Task] = deque()
        self._announcements: dict[str, str] = {}  # task id -> its line, in finishing order

    # -- starting work -----------------------------------------------------------------

    def refusal(
        self, *, system: bool = False, counted: bool = True, kind: Kind = "command",
        kind_limit: int | None = None,
    ) -> str | None:
        """Why a task like this would be refused now, or None when it would be admitted."""
        try:
            return self._admission(system, counted, kind, kind_limit, queue=True)
        except PoolRefused as exc:
            return str(exc)

    async def start_command(
        self,
        command: str,
        cwd: Path,
        *,
        timeout_seconds: float | None = None,
        expected_seconds: float | None = None,
        label: str | None = None,
        system: bool = False,
        counted: bool = True,
        queue: bool = False,
        editor: Editor | None = None,
    ) -> Task:
        """Run a shell command as a task (in the client's terminal when `editor` offers
        terminals, else a local process group). PoolRefused when it is not admitted; with
        queue=True a full pool queues it instead, and its hard limit starts when it runs."""
        task = await self._reserve(
            "command", label or command, system=system, counted=counted, kind_limit=None,
            queue=queue, limit=self.settings.hard_limit(timeout_seconds, expected_seconds),
            command=command, cwd=str(cwd),
        )
        failed: str | None = None
        if task._admitted.is_set():
            # Started before its record is written, so the record is written once with its
            # pid; a queued command starts in its body, when a slot frees.
            try:
                await self._spawn(task, command, cwd, editor)
            except OSError as exc:
                failed = f"cannot start the command: {exc.strerror or exc}"
            except BaseException:
                self._forget(task)
                raise
        try:
            await self._register(task)
        except BaseException:
            if task.process is not None:
                with anyio.CancelScope(shield=True):
                    await task.process.kill()
            raise

        async def body(task: Task) -> _Outcome:
            if failed is not None:
                return _Outcome("failed", failed)
            if task.process is None:
                try:
                    await self._spawn(task, command, cwd, editor)
                except OSError as exc:
                    return _Outcome("failed", f"cannot start the command: {exc.strerror or exc}")
                await self._write(task)
            return await _follow(task)

        self._launch(task, body)
        return task

    async def adopt(
        self, process: CommandProcess, *, command: str, cwd: Path, label: str | None = None
    ) -> Task:
        """Take over a foreground command still running at its call's timeout: it becomes a
        task with max_timeout_seconds from its start as its hard limit. PoolRefused when the
        pool has no room (the caller then kills it)."""
        elapsed = anyio.current_time() - process.started
        task = await self._reserve(
            "command", label or command, system=False, counted=True, kind_limit=None,
            queue=False, limit=self.settings.max_timeout_seconds, command=command,
            cwd=str(cwd), log=process.log, t0=self.clock.now() - elapsed,
            started_at=_stamp(datetime.now(UTC) - timedelta(seconds=elapsed)),
        )
        task.process = process
        task.record.pid = process.pid
        await self._register(task)
        self._launch(task, _follow)
        return task

    async def start_agent(
        self,
        *,
        label: str,
        agent_name: str,
        child_session_id: str,
        body: Callable[[Task], Awaitable[str]],
        system: bool = False,
        timeout_seconds: float | None = None,
        expected_seconds: float | None = None,
        counted: bool = True,
        kind_limit: int | None = None,
        queue: bool = False,
        on_finish: Callable[[Task], None] | None = None,
        agent_system: bool = False,
        log: TaskLog | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> Task:
        """Run a child agent as a task: body(task) runs its turn, writing progress to task.log,
        and returns its report (Task.result); an exception fails the task with its message.
        kind_limit bounds the counted agent tasks running at once (subagents.max_concurrent).
        PoolRefused when not admitted (unless queue=True). log is one of the caller's making
        (new_log with a filter), and redact rewrites the record's label and error, so that
        none of the task's files keeps what they must not."""
        task = await self._reserve(
            "agent", redact(label) if redact else label, system=system, counted=counted,
            kind_limit=kind_limit, queue=queue,
            limit=self.settings.hard_limit(timeout_seconds, expected_seconds),
            agent=AgentRef(name=agent_name, session_id=child_session_id, system=agent_system),
            log=log,
        )
        task.redact = redact
        if on_finish is not None:
            task.add_done_callback(on_finish)
        await self._register(task)

        async def run(task: Task) -> _Outcome:
            task.result = await body(task)
            return _Outcome("succeeded")

        self._launch(task, run)
        return task

    async def open_process(
        self, command: str, cwd: Path, log: TaskLog, *, editor: Editor | None = None
    ) -> CommandProcess:
        """Start a command followed in the owner group, not yet a task (a foreground call
        waits for it, and may `adopt` it). OSError when it cannot start."""
        return await start_process(
            self.owner, command, cwd, log, grace=self.settings.kill_grace_seconds,
            editor=editor, session_id=self.session_id,
        )

    async def _spawn(self, task: Task, command: str, cwd: Path, editor: Editor | None) -> None:
        task.process = await self.open_process(command, cwd, task.log, editor=editor)
        task.record.pid = task.process.pid

    def new_log(self, text_filter: TextFilter | None = None) -> TaskLog:
        """A log bounded as this pool's task logs are (tools.output_limits.log_bytes), its
        text rewritten by text_filter when there is one."""
        return TaskLog(self.settings.log_bytes, text_filter)

    # -- reading and controlling -------------------------------------------------------

    def get(self, task_id: str) -> Task | None:
        """A task this process runs or ran, or None."""
        return self._tasks.get(task_id)

    async def record(self, task_id: str) -> TaskRecord:
        """A task's record as of now (orphaned derived for records left unfinished by a
        process that ended). UnknownTask when the session has none with that id."""
        task = self._tasks.get(task_id)
        if task is not None:
            return task.snapshot()
        found = await anyio.to_thread.run_sync(read_task, self.bundle, task_id)
        if found is None:
            raise UnknownTask(task_id)
        return found

    async def list(self, include_system: bool = False) -> builtins.list[TaskRecord]:
        """Every task of the session, other processes' included, oldest first."""
        tasks = self._tasks
        on_disk, records = await anyio.to_thread.run_sync(read_tasks, self.bundle, set(tasks))
        # A finished task of ours whose folder was removed (retention elsewhere) is gone.
        records += [t.snapshot() for t in tasks.values() if not t.done.is_set() or t.id in on_disk]
        records.sort(key=lambda r: task_number(r.id) or 0)
        return [r for r in records if include_system or not r.system]

    async def output(
        self, task_id: str, tail_lines: int = 100, max_chars: int | None = None
    ) -> str:
        """The last tail_lines lines of a task's output as a model reads it: escape sequences
        and carriage-return redraws resolved, at most max_chars (default output_chars)."""
        limit = max_chars or self.settings.output_chars
        budget = read_budget(limit)
        task = self._tasks.get(task_id)
        raw: bytes | None = None
        if task is not None:
            if task.process is not None and not task.done.is_set():
                raw = await task.process.live_output()
            if raw is None:
                raw = await task.log.read_tail(budget)
        else:
            await self.record(task_id)  # UnknownTask for an id the session never had
            path = task_dir(self.bundle, task_id) / LOG_FILE
            raw = await anyio.to_thread.run_sync(read_file_tail, path, budget)
        text = raw.decode("utf-8", errors="replace")
        if len(raw) >= budget:  # started mid-line
            text = text.partition("\n")[2]
        return last_lines(clean_output(text), tail_lines, limit)

    async def wait(
        self,
        task: Task | str,
        timeout: float | None = None,  # noqa: ASYNC109 - a bounded wait that reports
    ) -> TaskRecord:
        """Wait until the task ended or timeout seconds passed; its record as of then."""
        if isinstance(task, str):
            found = self._tasks.get(task)
            if found is None:
                return await self.record(task)
            task = found
        with anyio.move_on_after(timeout):
            await task.done.wait()
        return task.snapshot()

    async def stop(self, task_id: str, reason: str = "stopped by background_stop") -> TaskRecord:
        """Stop a task (SIGTERM to its process group, SIGKILL after the grace) and return
        its final record; a task that already ended is left as it is."""
        task = self._tasks.get(task_id)
        if task is None:
            return await self.record(task_id)
        if not task.done.is_set():
            task._stop_reason = task._stop_reason or reason
            task._scope.cancel()
            await task.done.wait()
        return task.snapshot()

    async def remove(self, task_id: str) -> None:
        """Delete a finished task's record and log (retention, e.g. memory.keep_runs).
        UnknownTask for an id the session does not have; ValueError while it runs."""
        task = self._tasks.get(task_id)
        if task is not None and not task.done.is_set():
            raise ValueError(f"{task_id} is still running")
        if task is None and not (await self.record(task_id)).finished:
            raise ValueError(f"{task_id} is still running in another process")
        folder = task_dir(self.bundle, task_id)
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(folder, ignore_errors=True))
        self._tasks.pop(task_id, None)
        self._announcements.pop(task_id, None)

    def take_announcements(self) -> builtins.list[str]:
        """One line per task that finished since the last call (never system tasks)."""
        lines = builtins.list(self._announcements.values())
        self._announcements = {}
        return lines

    def acknowledge(self, task_id: str) -> None:
        """The model already read how this task ended (a tool result said so): no need to
        announce it again."""
        self._announcements.pop(task_id, None)

    def running_lines(self) -> builtins.list[str]:
        """One line per task queued or running now (never system tasks)."""
        now = datetime.now(UTC)
        return [
            t.record.summary(now)
            for t in self._tasks.values()
            if not t.record.system and not t.done.is_set()
        ]

    @property
    def busy(self) -> bool:
        """Whether a task (a system task included) is queued or running: its session is in use."""
        return any(not t.done.is_set() for t in self._tasks.values())

    def close_nowait(self, reason: str = "stopped: the session closed") -> None:
        """Refuse new tasks and stop every running one; their cleanup (process groups
        killed, records written) finishes in the owner group."""
        self.closed = True
        for task in self._tasks.values():
            if not task.done.is_set():
                task._stop_reason = task._stop_reason or reason
                task._scope.cancel()

    async def aclose(self, reason: str = "stopped: the session closed") -> None:
        """close_nowait, then wait until every task has ended."""
        self.close_nowait(reason)
        for task in list(self._tasks.values()):
            await task.done.wait()

    # -- inside ------------------------------------------------------------------------

    def _full(self, counted: bool, kind: Kind, kind_limit: int | None) -> str | None:
        if not counted:
            return None
        running = [t for t in self._tasks.values() if t.counted and _holds_slot(t)]
        limit = self.settings.max_concurrent
        if len(running) >= limit:
            return (
                f"the session already runs {len(running)} of {limit} background tasks "
                "(tools.background.max_concurrent); wait for one to finish or stop one"
            )
        if kind_limit is not None:
            same = sum(1 for t in running if t.record.kind == kind)
            if same >= kind_limit:
                return f"the session already runs {same} of {kind_limit} {kind} tasks"
        return None

    def _admission(
        self, system: bool, counted: bool, kind: Kind, kind_limit: int | None, queue: bool
    ) -> str | None:
        """None when a task like this runs now, why the pool is full when it queues;
        PoolRefused when it is not admitted."""
        if self.closed:
            raise PoolRefused("the session's background pool is closed")
        if not system and not self.settings.enabled:
            raise PoolRefused("background tasks are turned off (tools.background.enabled: false)")
        full = None if system else self._full(counted, kind, kind_limit)
        if full is not None and not queue:
            raise PoolRefused(full)
        return full

    async def _reserve(
        self,
        kind: Kind,
        label: str,
        *,
        system: bool,
        counted: bool,
        kind_limit: int | None,
        queue: bool,
        limit: float,
        log: TaskLog | None = None,
        t0: float | None = None,
        started_at: str | None = None,
        command: str | None = None,
        cwd: str | None = None,
        agent: AgentRef | None = None,
    ) -> Task:
        self._admission(system, counted, kind, kind_limit, queue)  # before an id is taken
        # Shielded: a folder this call claims is either a task's or let go, never left held.
        try:
            with anyio.CancelScope(shield=True):
                claimed = await anyio.to_thread.run_sync(claim_task, self.bundle, self._next)
        except OSError as exc:
            raise _unrecorded(task_dir(self.bundle, ""), exc) from None
        task_id, claim = claimed
        # Synchronous from this admission check to the registration: two starts racing for
        # the last slot cannot both get it.
        try:
            full = self._admission(system, counted, kind, kind_limit, queue)
        except PoolRefused:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(abandon_task, self.bundle, task_id, claim)
            raise
        self._next = (task_number(task_id) or 0) + 1
        record = TaskRecord(
            id=task_id, session_id=self.session_id, kind=kind, label=label, system=system,
            timeout_seconds=limit, status="queued" if full else "running", command=command,
            cwd=cwd, agent=agent,
        )
        task = Task(record, log or self.new_log(), counted=counted, kind_limit=kind_limit)
        task._claim = claim
        self._tasks[task_id] = task
        if full:
            self._queue.append(task)
        else:
            self._mark_running(task, t0, started_at)
        return task

    def _mark_running(self, task: Task, t0: float | None, started_at: str | None) -> None:
        task.record.status = "running"
        task.record.started_at = started_at or utc_now()
        task._t0 = self.clock.now() if t0 is None else t0
        task._admitted.set()

    async def _register(self, task: Task) -> None:
        folder = task_dir(self.bundle, task.id)
        try:
            await task.log.attach(folder / LOG_FILE)  # makes the folder
            await self._write(task, raise_errors=True)
        except BaseException as exc:
            # A task never launched must not hold a slot, nor keep aclose() waiting.
            self._forget(task)
            if isinstance(exc, OSError):
                raise _unrecorded(folder, exc) from None
            raise

    def _forget(self, task: Task) -> None:
        self._tasks.pop(task.id, None)
        _let_go(task)
        task.done.set()
        if task in self._queue:
            self._queue.remove(task)
        self._admit_queued()

    def _launch(self, task: Task, body: Body) -> None:
        self.owner.start_soon(self._supervise, task, body, name=f"background {task.id}")

    async def _supervise(self, task: Task, body: Body) -> None:
        outcome = _Outcome("failed", "ended without an outcome")
        try:
            with task._scope:
                if not task._admitted.is_set():
                    await task._admitted.wait()
                    await self._write(task)
                left = task._t0 + (task.record.timeout_seconds or 0) - self.clock.now()
                with self.clock.move_on_after(left) as limit:
                    outcome = await body(task)
                if limit.cancelled_caught:
                    after = format_seconds(task.record.timeout_seconds or 0)
                    outcome = _Outcome("timed_out", f"timed out after {after} (its hard limit)")
            if task._scope.cancelled_caught:
                outcome = _Outcome("stopped", task._stop_reason or "stopped")
        except anyio.get_cancelled_exc_class():
            reason = task._stop_reason or "stopped: the session's background work ended"
            outcome = _Outcome("stopped", reason)
            raise
        except TaskFailed as exc:
            outcome = _Outcome("failed", str(exc))
        except Exception as exc:
            log.warning("background task %s failed: %s", task.id, exc, exc_info=True)
            outcome = _Outcome("failed", f"{type(exc).__name__}: {exc}")
        finally:
            with anyio.CancelScope(shield=True):
                await self._finish(task, outcome)

    async def _finish(self, task: Task, outcome: _Outcome) -> None:
        proc = task.process
        if proc is not None:
            await proc.kill()  # nothing to do when it ended by itself
            if proc.exit is not None:
                task.record.exit_code = proc.exit.exit_code
        try:
            await task.log.close()
        except OSError as exc:
            log.warning("cannot finish the log of %s: %s", task.id, exc)
        record = task.record
        record.status = outcome.status
        record.error = outcome.error
        if record.error and task.redact is not None:
            record.error = task.redact(record.error)
        record.finished_at = utc_now()
        record.started_at = record.started_at or record.finished_at
        record.output_bytes = task.log.total
        record.output_truncated = task.log.truncated
        if task in self._queue:
            self._queue.remove(task)
        await self._write(task)
        _let_go(task)  # the record is final: readers elsewhere may take it as it is
        if not record.system:
            self._announcements[task.id] = record.summary()
        task.done.set()
        self._admit_queued()
        callbacks, task._callbacks = task._callbacks, []
        for callback in callbacks:
            _call(callback, task)

    def _admit_queued(self) -> None:
        for task in list(self._queue):
            if self.closed:
                return
            if self._full(task.counted, task.record.kind, task.kind_limit) is None:
                self._queue.remove(task)
                self._mark_running(task, None, None)

    async def _write(self, task: Task, raise_errors: bool = False) -> None:
        # Serialised per task, each write carrying the record as it is when its turn comes.
        path = task_dir(self.bundle, task.id) / META_FILE
        async with task._writing:
            data = task.snapshot().dump()
            # A system task (a memory run on every turn's path) skips the syncs: see atomic.py.
            write = partial(write_json_atomic, path, data, durable=not task.record.system)
            try:
                await anyio.to_thread.run_sync(write)
            except OSError as exc:
                if raise_errors:
                    raise
                log.warning("cannot write the record of %s: %s", task.id, exc)


async def _follow(task: Task) -> _Outcome:
    proc = task.process
    assert proc is not None
    await proc.done.wait()
    if proc.exit is not None:
        task.record.exit_code = proc.exit.exit_code
    if proc.error is not None:
        return _Outcome("failed", proc.error)
    if proc.exit is None:
        return _Outcome("failed", "the command ended with no exit status")
    if proc.exit.exit_code == 0:
        return _Outcome("succeeded")
    why = proc.exit.describe()
    if proc.exit.exit_code == 127:
        why += " (command not found)"
    return _Outcome("failed", why)


def _unrecorded(folder: Path, exc: OSError) -> PoolRefused:
    return PoolRefused(f"cannot record the task in {folder}: {exc.strerror or exc}")


def _let_go(task: Task) -> None:
    if task._claim is not None:
        release_task(task._claim)
        task._claim = None


def _holds_slot(task: Task) -> bool:
    return task.record.status == "running" and not task.done.is_set()


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _call(callback: Callable[[Task], None], task: Task) -> None:
    try:
        callback(task)
    except Exception:  # one caller's bug must not keep others from hearing of the end
        log.exception("on-finish callback of %s failed", task.id)
