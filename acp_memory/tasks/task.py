"""One background task: its record kept current, its log, its run to an outcome, its final record.

A task's body runs inside the task's stop scope and under its hard limit. However it ends,
its record is sealed with the outcome and written, and its folder's lock is let go.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio

from acp_memory.atomic import write_json_atomic
from acp_memory.clock import Clock
from acp_memory.tasks.log import TaskLog
from acp_memory.tasks.process import CommandProcess
from acp_memory.tasks.records import (
    META_FILE,
    Status,
    TaskRecord,
    format_seconds,
    release_task,
)
from acp_memory.timestamps import now_iso

log = logging.getLogger(__name__)


class TaskFailed(Exception):
    """Raised by a task's body to fail it with exactly this reason (no exception type in
    front), e.g. a provider's status and words."""


@dataclass(frozen=True)
class Outcome:
    """How a task ended: its final status and, unless it succeeded, why."""

    status: Status
    error: str | None = None


Body = Callable[["Task"], Awaitable[Outcome]]


class Task:
    """A task of this process: its record (kept current), log, end event and outcome."""

    def __init__(
        self,
        record: TaskRecord,
        log: TaskLog,
        folder: Path,
        *,
        kind_limit: int | None = None,
        claim: int | None = None,
    ) -> None:
        self.record = record
        self.log = log
        self.folder = folder  # background/<taskId>/
        self.kind_limit = kind_limit
        self.done = anyio.Event()  # set once it ended and its final record is written
        # Set once its outcome is in its record (status, result, cost), before that record is
        # on disk: a turn waiting for a memory run's report need not wait for the disk.
        self.ended = anyio.Event()
        # Blocking work done in the trip that writes the final record, right after it (a
        # memory run journals its cost): given the final record.
        self.on_sealed: Callable[[TaskRecord], None] | None = None
        self.result: str | None = None  # an agent task's report
        self.process: CommandProcess | None = None
        self.redact: Callable[[str], str] | None = None  # of the record's error, if set
        self.outcome = Outcome("failed", "ended without an outcome")
        self._scope = anyio.CancelScope()
        self._stop_reason: str | None = None
        self._admitted = anyio.Event()
        self._t0 = 0.0  # the pool clock's time when it started running
        self._callbacks: list[Callable[[Task], None]] = []  # told once it is done
        self._ended_callbacks: list[Callable[[Task], None]] = []  # told once it ended
        self._writing = anyio.Lock()
        self._claim = claim  # holds the folder's lock until the record is final

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def admitted(self) -> bool:
        """Whether it left the queue (or never waited in it)."""
        return self._admitted.is_set()

    @property
    def holds_slot(self) -> bool:
        """Whether it takes one of the pool's slots now: it runs and has not ended."""
        return self.record.status == "running" and not self.done.is_set()

    def snapshot(self) -> TaskRecord:
        """The record as of now (output counters included), a copy."""
        return self.record.model_copy(
            update={"output_bytes": self.log.total, "output_truncated": self.log.truncated}
        )

    def add_done_callback(self, callback: Callable[[Task], None]) -> None:
        """Call callback(task) once it is done (at once if it already is)."""
        self._when(self.done, self._callbacks, callback)

    def add_ended_callback(self, callback: Callable[[Task], None]) -> None:
        """Call callback(task) once it ended, its outcome known but its final record maybe
        not yet on disk (at once if it already ended)."""
        self._when(self.ended, self._ended_callbacks, callback)

    def end(self) -> None:
        """Its outcome is final: `ended` set, then every add_ended_callback caller told
        (once)."""
        self.ended.set()
        self._tell(self._ended_callbacks)

    async def output_tail(self, max_bytes: int) -> bytes:
        """Its last max_bytes of output: live from a client's terminal while it runs, else
        from its log."""
        raw = None
        if self.process is not None and not self.done.is_set():
            raw = await self.process.live_output()
        return raw if raw is not None else await self.log.read_tail(max_bytes)

    def admit(self, t0: float, started_at: str | None = None) -> None:
        """It runs from now on; its hard limit counts from t0 on the pool's clock."""
        self.record.status = "running"
        self.record.started_at = started_at or now_iso()
        self._t0 = t0
        self._admitted.set()

    def stop(self, reason: str) -> None:
        """Cancel its run, unless it ended; the first reason given is the one recorded."""
        if not self.done.is_set():
            self._stop_reason = self._stop_reason or reason
            self._scope.cancel()

    async def run(self, body: Body, clock: Clock) -> None:
        """Wait for its admission, then run body within its stop scope and its hard limit on
        clock; `outcome` says how it ended. A cancel from outside passes through."""
        try:
            with self._scope:
                if not self._admitted.is_set():
                    await self._admitted.wait()
                    await self.write_record()
                left = self._t0 + (self.record.timeout_seconds or 0) - clock.now()
                with clock.move_on_after(left) as limit:
                    self.outcome = await body(self)
                if limit.cancelled_caught:
                    after = format_seconds(self.record.timeout_seconds or 0)
                    self.outcome = Outcome("timed_out", f"timed out after {after} (its hard limit)")
            if self._scope.cancelled_caught:
                self.outcome = Outcome("stopped", self._stop_reason or "stopped")
        except anyio.get_cancelled_exc_class():
            reason = self._stop_reason or "stopped: the session's background work ended"
            self.outcome = Outcome("stopped", reason)
            raise
        except TaskFailed as exc:
            self.outcome = Outcome("failed", str(exc))
        except Exception as exc:
            log.warning("background task %s failed: %s", self.id, exc, exc_info=True)
            self.outcome = Outcome("failed", f"{type(exc).__name__}: {exc}")

    async def seal(self) -> None:
        """Its process killed, its log closed, its record final with `outcome` and written,
        its folder's lock let go. Call it shielded."""
        proc = self.process
        if proc is not None:
            await proc.kill()  # nothing to do when it ended by itself
            if proc.exit is not None:
                self.record.exit_code = proc.exit.exit_code
        try:
            await self.log.close()
        except OSError as exc:
            log.warning("cannot finish the log of %s: %s", self.id, exc)
        record = self.record
        record.status = self.outcome.status
        record.error = self.outcome.error
        if record.error and self.redact is not None:
            record.error = self.redact(record.error)
        record.finished_at = now_iso()
        record.started_at = record.started_at or record.finished_at
        if record.cost is not None:  # timed as the record is, so every surface says one time
            record.cost.duration_ms = record.duration_ms()
        record.output_bytes = self.log.total
        record.output_truncated = self.log.truncated
        self.end()
        await self.write_record(final=True)
        self.release()  # the record is final: readers elsewhere may take it as it is

    def release(self) -> None:
        """Let the folder's lock go: the record is final, or the task never started."""
        if self._claim is not None:
            release_task(self._claim)
            self._claim = None

    def call_done_callbacks(self) -> None:
        """Tell every add_done_callback caller that it is done (once)."""
        self._tell(self._callbacks)

    def _when(
        self, event: anyio.Event, waiting: list[Callable[[Task], None]],
        callback: Callable[[Task], None],
    ) -> None:
        if event.is_set():
            _call(callback, self)
        else:
            waiting.append(callback)

    def _tell(self, waiting: list[Callable[[Task], None]]) -> None:
        callbacks = waiting[:]
        waiting.clear()  # once: a callback that adds another is told of it at once
        for callback in callbacks:
            _call(callback, self)

    async def write_record(self, *, raise_errors: bool = False, final: bool = False) -> None:
        """meta.json in a worker thread, as the record stands when this write's turn comes
        (writes are serialised). OSError only with raise_errors; otherwise it is logged.
        The final record (from seal) is followed by on_sealed in the same trip."""
        async with self._writing:
            snapshot = self.snapshot()
            write = partial(self._write, snapshot, self.on_sealed if final else None, final)
            try:
                await anyio.to_thread.run_sync(write)
            except OSError as exc:
                if raise_errors:
                    raise
                log.warning("cannot write the record of %s: %s", self.id, exc)

    def _write(
        self, record: TaskRecord, then: Callable[[TaskRecord], None] | None, final: bool
    ) -> None:
        # A system task (a memory run on every turn's path) syncs its final record alone: a
        # record it left unfinished reads as orphaned once its process is gone (records.py).
        durable = final or not record.system
        try:
            write_json_atomic(self.folder / META_FILE, record.dump(), durable=durable)
        finally:
            if then is not None:  # it catches its own errors
                then(record)


async def follow_process(task: Task) -> Outcome:
    """The body of a command task: its outcome once its process ended."""
    proc = task.process
    assert proc is not None
    await proc.done.wait()
    if proc.exit is not None:
        task.record.exit_code = proc.exit.exit_code
    if proc.error is not None:
        return Outcome("failed", proc.error)
    if proc.exit is None:
        return Outcome("failed", "the command ended with no exit status")
    if proc.exit.exit_code == 0:
        return Outcome("succeeded")
    why = proc.exit.describe()
    if proc.exit.exit_code == 127:
        why += " (command not found)"
    return Outcome("failed", why)


def _call(callback: Callable[[Task], None], task: Task) -> None:
    try:
        callback(task)
    except Exception:  # one caller's bug must not keep others from hearing of the end
        log.exception("a callback on the end of %s failed", task.id)
