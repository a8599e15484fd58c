"""How a task gets into a session's pool: the bounds it is checked against, the id it claims
in the bundle, and the queue it may wait in for a slot.

Counted tasks share `max_concurrent` slots, and a kind may have a tighter limit of its own
(subagents.max_concurrent). System tasks (the memory run) are never counted and run even
with background tasks turned off; only a closed pool refuses them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from acp_memory.clock import Clock
from acp_memory.tasks.log import TaskLog
from acp_memory.tasks.process import KILL_GRACE_SECONDS
from acp_memory.tasks.records import (
    Kind,
    TaskRecord,
    abandon_task,
    claim_task,
    task_dir,
    task_number,
)
from acp_memory.tasks.task import Task
from acp_memory.timestamps import now_iso

if TYPE_CHECKING:
    from acp_memory.config.models import ToolsConfig

# A model's hard limit from its own estimate: three times what it expects, never under this.
EXPECTED_FLOOR_SECONDS = 60.0


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

    @classmethod
    def unrecorded(cls, folder: Path, exc: OSError) -> PoolRefused:
        """The task's folder, record or log could not be written."""
        return cls(f"cannot record the task in {folder}: {exc.strerror or exc}")


class Admission:
    """A pool's bounds applied to its tasks: who is refused, who runs now, who waits for a
    slot in the queue (oldest first), and when a waiting one runs."""

    def __init__(
        self, settings: PoolSettings, clock: Clock, bundle: Path, tasks: dict[str, Task]
    ) -> None:
        self.settings = settings
        self.clock = clock  # where a task's hard limit starts counting when it is admitted
        self.bundle = bundle
        self.closed = False  # once closed, nothing more is admitted
        self._tasks = tasks  # the pool's own, which an admitted task joins
        self._next = 1  # where the next id is looked for: ids never go back in this pool
        self._queue: deque[Task] = deque()

    def check(self, *, system: bool, kind: Kind, kind_limit: int | None, queue: bool) -> str | None:
        """None when a task like this runs now, why the pool is full when it queues
        (queue=True); PoolRefused when it is not admitted."""
        if self.closed:
            raise PoolRefused("the session's background pool is closed")
        if system:
            return None
        if not self.settings.enabled:
            raise PoolRefused("background tasks are turned off (tools.background.enabled: false)")
        full = self._why_full(kind, kind_limit)
        if full is not None and not queue:
            raise PoolRefused(full)
        return full

    async def reserve(
        self,
        record: TaskRecord,
        log: TaskLog,
        *,
        kind_limit: int | None = None,
        queue: bool = False,
        t0: float | None = None,
        started_at: str | None = None,
        opening: Callable[[TaskRecord, Path], None] | None = None,
    ) -> Task:
        """The task the record describes (its id and status set here), admitted under an id
        claimed in the bundle, joins the pool: running now (its limit counting from t0,
        default now), or queued when the pool is full and queue=True. PoolRefused when it is
        not admitted.

        opening, for a system task only (never counted, so it runs at once and its first
        record is known before its claim), is blocking work done in the claim's own worker
        thread trip with that record and the task's folder: its first files."""
        check = partial(
            self.check, system=record.system, kind=record.kind, kind_limit=kind_limit,
            queue=queue,
        )
        check()  # before an id is taken
        if opening is not None:
            if not record.system:
                raise ValueError("only a system task opens its files with its claim")
            started_at = started_at or now_iso()
        claiming = partial(self._claim, record, started_at, opening)
        # Shielded: a folder this call claims is either a task's or let go, never left held.
        try:
            with anyio.CancelScope(shield=True):
                claimed = await anyio.to_thread.run_sync(claiming)
        except OSError as exc:
            raise PoolRefused.unrecorded(task_dir(self.bundle, ""), exc) from None
        task_id, claim = claimed
        # Synchronous from this admission check to the task joining the pool: two starts
        # racing for the last slot cannot both get it.
        try:
            full = check()
        except PoolRefused:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(abandon_task, self.bundle, task_id, claim)
            raise
        self._next = (task_number(task_id) or 0) + 1
        record.id, record.status = task_id, "queued" if full else "running"
        folder = task_dir(self.bundle, task_id)
        task = Task(record, log, folder, kind_limit=kind_limit, claim=claim)
        self._tasks[task_id] = task
        if full:
            self._queue.append(task)
        else:
            task.admit(self.clock.now() if t0 is None else t0, started_at)
        return task

    def _claim(
        self,
        record: TaskRecord,
        started_at: str | None,
        opening: Callable[[TaskRecord, Path], None] | None,
    ) -> tuple[str, int]:
        task_id, fd = claim_task(self.bundle, self._next)
        if opening is None:
            return task_id, fd
        first = record.model_copy(
            update={"id": task_id, "status": "running", "started_at": started_at}
        )
        try:
            opening(first, task_dir(self.bundle, task_id))
        except BaseException:
            abandon_task(self.bundle, task_id, fd)
            raise
        return task_id, fd

    def close(self) -> None:
        """Admit nothing more: the pool closed."""
        self.closed = True

    def withdraw(self, task: Task) -> None:
        """A task that ends (or never launched) leaves the queue if it waited there."""
        if task in self._queue:
            self._queue.remove(task)

    def admit_waiting(self) -> None:
        """Queued tasks run, oldest first, as long as slots are free for them."""
        for task in list(self._queue):
            if self.closed:
                return
            if self._why_full(task.record.kind, task.kind_limit) is None:
                self._queue.remove(task)
                task.admit(self.clock.now())

    def _why_full(self, kind: Kind, kind_limit: int | None) -> str | None:
        running = [t for t in self._tasks.values() if not t.record.system and t.holds_slot]
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
