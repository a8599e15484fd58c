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

import shutil
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from acp_memory.atomic import write_json_atomic
from acp_memory.clock import Clock
from acp_memory.editor import Editor
from acp_memory.tasks.admission import Admission, PoolRefused, PoolSettings
from acp_memory.tasks.announcements import Announcements
from acp_memory.tasks.log import TaskLog, TextFilter, read_budget, read_file_tail, tail_view
from acp_memory.tasks.process import CommandProcess, start_process
from acp_memory.tasks.records import (
    LOG_FILE,
    META_FILE,
    AgentRef,
    TaskRecord,
    read_task,
    read_tasks,
    task_dir,
    task_number,
)
from acp_memory.tasks.task import Body, Outcome, Task, follow_process
from acp_memory.timestamps import iso, utc_now


class UnknownTask(LookupError):
    """No task of this session has that id."""

    def __init__(self, task_id: str) -> None:
        super().__init__(
            f"there is no background task {task_id!r} in this session "
            "(background_list shows them)"
        )
        self.task_id = task_id


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
        # Tasks of this pool, running or finished; every other record is read from the bundle
        # when asked for, so another process's (or pool's) tasks are seen as they are now.
        self._tasks: dict[str, Task] = {}
        self.admission = Admission(self.settings, self.clock, bundle, self._tasks)
        self.announcements = Announcements()  # for the session's next model step

    @property
    def closed(self) -> bool:
        """Whether the pool refuses new tasks (it closed with its session)."""
        return self.admission.closed

    # -- starting work -----------------------------------------------------------------

    async def start_command(
        self,
        command: str,
        cwd: Path,
        *,
        timeout_seconds: float | None = None,
        expected_seconds: float | None = None,
        label: str | None = None,
        queue: bool = False,
        editor: Editor | None = None,
    ) -> Task:
        """Run a shell command as a task (in the client's terminal when `editor` offers
        terminals, else a local process group). PoolRefused when it is not admitted; with
        queue=True a full pool queues it instead, and its hard limit starts when it runs."""
        limit = self.settings.hard_limit(timeout_seconds, expected_seconds)
        record = TaskRecord(
            id="", session_id=self.session_id, kind="command", label=label or command,
            timeout_seconds=limit, command=command, cwd=str(cwd),
        )
        task = await self.admission.reserve(record, self.new_log(), queue=queue)
        failed: str | None = None
        if task.admitted:
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

        async def body(task: Task) -> Outcome:
            if failed is not None:
                return Outcome("failed", failed)
            if task.process is None:
                try:
                    await self._spawn(task, command, cwd, editor)
                except OSError as exc:
                    return Outcome("failed", f"cannot start the command: {exc.strerror or exc}")
                await task.write_record()
            return await follow_process(task)

        self._launch(task, body)
        return task

    async def adopt(
        self, process: CommandProcess, *, command: str, cwd: Path, label: str | None = None
    ) -> Task:
        """Take over a foreground command still running at its call's timeout: it becomes a
        task with max_timeout_seconds from its start as its hard limit. PoolRefused when the
        pool has no room (the caller then kills it)."""
        elapsed = anyio.current_time() - process.started
        limit = self.settings.max_timeout_seconds
        record = TaskRecord(
            id="", session_id=self.session_id, kind="command", label=label or command,
            timeout_seconds=limit, command=command, cwd=str(cwd),
        )
        task = await self.admission.reserve(
            record, process.log, t0=self.clock.now() - elapsed,
            started_at=iso(utc_now() - timedelta(seconds=elapsed)),
        )
        task.process = process
        task.record.pid = process.pid
        await self._register(task)
        self._launch(task, follow_process)
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
        kind_limit: int | None = None,
        queue: bool = False,
        on_finish: Callable[[Task], None] | None = None,
        log: TaskLog | None = None,
        redact: Callable[[str], str] | None = None,
        setup: Callable[[TaskRecord], None] | None = None,
        on_sealed: Callable[[TaskRecord], None] | None = None,
    ) -> Task:
        """Run a child agent as a task: body(task) runs its turn, writing progress to task.log,
        and returns its report (Task.result); an exception fails the task with its message.
        system=True makes it the runtime's own child (the memory run): never counted, flagged
        system in its record. kind_limit bounds the counted agent tasks running at once
        (subagents.max_concurrent). PoolRefused when not admitted (unless queue=True). log is
        one of the caller's making (new_log with a filter), and redact rewrites the record's
        label and error, so that none of the task's files keeps what they must not.

        A system task's folder, log and first record are made in its claim's worker-thread
        trip, with setup(first record) (blocking: the memory run's child bundle) in the same
        trip; on_sealed(final record) is blocking work in the trip that writes its final
        record (Task.on_sealed)."""
        limit = self.settings.hard_limit(timeout_seconds, expected_seconds)
        agent = AgentRef(name=agent_name, session_id=child_session_id, system=system)
        record = TaskRecord(
            id="", session_id=self.session_id, kind="agent", system=system, agent=agent,
            label=redact(label) if redact else label, timeout_seconds=limit,
        )
        log = log or self.new_log()
        opening = None
        if system:
            written, make_log = log.opening()
            opening = partial(_open_files, make_log, log.total, setup)
        elif setup is not None:
            raise ValueError("only a system task is set up in its claim's trip")
        task = await self.admission.reserve(
            record, log, kind_limit=kind_limit, queue=queue, opening=opening
        )
        task.redact = redact
        task.on_sealed = on_sealed
        if on_finish is not None:
            task.add_done_callback(on_finish)
        if system:
            log.attached(task.folder / LOG_FILE, len(written))  # made in the claim's trip
        else:
            await self._register(task)

        async def run(task: Task) -> Outcome:
            task.result = await body(task)
            return Outcome("succeeded")

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

    def new_log(self, text_filter: TextFilter | None = None, *, inline: bool = False) -> TaskLog:
        """A log bounded as this pool's task logs are (tools.output_limits.log_bytes), its
        text rewritten by text_filter when there is one; inline: see TaskLog."""
        return TaskLog(self.settings.log_bytes, text_filter, inline=inline)

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

    async def records(self, include_system: bool = False) -> list[TaskRecord]:
        """The record of every task of the session, other processes' included, oldest first."""
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
        if task is not None:
            raw = await task.output_tail(budget)
        else:
            await self.record(task_id)  # UnknownTask for an id the session never had
            path = task_dir(self.bundle, task_id) / LOG_FILE
            raw = await anyio.to_thread.run_sync(read_file_tail, path, budget)
        return tail_view(raw, budget, tail_lines, limit)

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
        task.stop(reason)
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
        self.announcements.acknowledge(task_id)

    def running_lines(self) -> list[str]:
        """One line per task queued or running now (never system tasks)."""
        now = utc_now()
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
        self.admission.close()
        for task in self._tasks.values():
            task.stop(reason)

    async def aclose(self, reason: str = "stopped: the session closed") -> None:
        """close_nowait, then wait until every task has ended."""
        self.close_nowait(reason)
        for task in list(self._tasks.values()):
            await task.done.wait()

    # -- inside ------------------------------------------------------------------------

    async def _register(self, task: Task) -> None:
        try:
            await task.log.attach(task.folder / LOG_FILE)  # makes the folder
            await task.write_record(raise_errors=True)
        except BaseException as exc:
            # A task never launched must not hold a slot, nor keep aclose() waiting.
            self._forget(task)
            if isinstance(exc, OSError):
                raise PoolRefused.unrecorded(task.folder, exc) from None
            raise

    def _forget(self, task: Task) -> None:
        self._tasks.pop(task.id, None)
        task.release()
        task.end()
        task.done.set()
        self.admission.withdraw(task)
        self.admission.admit_waiting()

    def _launch(self, task: Task, body: Body) -> None:
        self.owner.start_soon(self._supervise, task, body, name=f"background {task.id}")

    async def _supervise(self, task: Task, body: Body) -> None:
        try:
            await task.run(body, self.clock)
        finally:
            with anyio.CancelScope(shield=True):
                self.admission.withdraw(task)  # stopped while it waited: never to run
                await task.seal()
                self.announcements.ended(task.record)
                task.done.set()
                self.admission.admit_waiting()
                task.call_done_callbacks()


def _open_files(
    make_log: Callable[[Path], None],
    output_bytes: int,
    setup: Callable[[TaskRecord], None] | None,
    record: TaskRecord,
    folder: Path,
) -> None:
    """A system task's first files, in its claim's trip: its log, its first record (no sync:
    a record left unfinished reads as orphaned), then what its caller sets up."""
    make_log(folder / LOG_FILE)
    first = record.model_copy(update={"output_bytes": output_bytes})
    write_json_atomic(folder / META_FILE, first.dump(), durable=False)
    if setup is not None:
        setup(record)
