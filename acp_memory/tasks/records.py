"""Task records: `background/<taskId>/meta.json`, snake_case as the reference agent writes it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from acp_memory.timestamps import parse_iso, utc_now

log = logging.getLogger(__name__)

BACKGROUND_DIR = "background"
META_FILE = "meta.json"
LOG_FILE = "output.log"
TASK_ID = re.compile(r"^bg_([1-9][0-9]*)$")

Status = Literal["queued", "running", "succeeded", "failed", "timed_out", "stopped", "orphaned"]
Kind = Literal["command", "agent"]
UNFINISHED: frozenset[str] = frozenset({"queued", "running"})


def parse_time(stamp: str | None) -> datetime | None:
    """A record's time, or None when it is unset or unreadable."""
    if not stamp:
        return None
    try:
        return parse_iso(stamp)
    except ValueError:
        return None


def task_number(task_id: str) -> int | None:
    """n of `bg_<n>`, or None for a name that is not a task id."""
    match = TASK_ID.match(task_id)
    return int(match.group(1)) if match else None


class AgentRef(BaseModel):
    """The child session an agent task runs."""

    model_config = ConfigDict(extra="ignore")

    name: str
    session_id: str
    # The runtime's own child (the memory subagent), told apart from a definition that is
    # merely named "memory"; written only when true.
    system: bool = False


class TaskCost(BaseModel):
    """What a memory run cost: its answered model calls and their tokens as the providers
    reported them (tokens in count the cached ones), and its time from start to finish."""

    model_config = ConfigDict(extra="ignore")

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_read_tokens: int = 0
    cached_write_tokens: int = 0
    duration_ms: int = 0

    def as_json(self) -> dict[str, int]:
        """camelCase, as the wire's `_meta.acpMemory` and the journal take it."""
        return {to_camel(name): value for name, value in self.model_dump().items()}

    def describe(self) -> str:
        """One line: `3 model calls, 1200 tokens in (800 cached), 95 out, 2.1 s`."""
        calls = f"{self.model_calls} model call{'' if self.model_calls == 1 else 's'}"
        cache = [(self.cached_read_tokens, "cached"),
                 (self.cached_write_tokens, "written to cache")]
        cached = ", ".join(f"{n} {what}" for n, what in cache if n)
        tokens_in = f"{self.input_tokens} tokens in" + (f" ({cached})" if cached else "")
        # Tenths rounded half up from whole milliseconds, as the web page's card rounds them
        # (a float's :.1f rounds 1.25 down).
        tenths = (self.duration_ms + 50) // 100
        return f"{calls}, {tokens_in}, {self.output_tokens} out, {tenths // 10}.{tenths % 10} s"


class TaskRecord(BaseModel):
    """One task as meta.json holds it. `agent` is written for agent tasks only, `cost` for
    memory runs only (a record written before runs had a cost reads as None)."""

    model_config = ConfigDict(extra="ignore", validate_assignment=False)

    id: str
    session_id: str
    kind: Kind
    label: str = ""
    command: str | None = None
    cwd: str | None = None
    status: Status = "queued"
    exit_code: int | None = None
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    timeout_seconds: float | None = None
    output_bytes: int = 0
    output_truncated: bool = False
    system: bool = False
    pid: int | None = None
    agent: AgentRef | None = None
    cost: TaskCost | None = None

    @property
    def finished(self) -> bool:
        return self.status not in UNFINISHED

    def dump(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        if self.cost is None:
            data.pop("cost")
        if self.kind != "agent":
            data.pop("agent")
        elif isinstance(data.get("agent"), dict) and not data["agent"].get("system"):
            data["agent"].pop("system", None)
        return data

    def elapsed_seconds(self, now: datetime | None = None) -> float | None:
        """Seconds from start to finish, or to `now` while it runs; None before it started."""
        start = parse_time(self.started_at)
        if start is None:
            return None
        end = parse_time(self.finished_at) if self.finished else (now or utc_now())
        return max(0.0, ((end or start) - start).total_seconds())

    def duration_ms(self) -> int:
        """elapsed_seconds in whole milliseconds (0 before it started)."""
        return int((self.elapsed_seconds() or 0) * 1000)

    def summary(self, now: datetime | None = None) -> str:
        """One line for the model: id, status, exit code, elapsed time and label, no output."""
        elapsed = self.elapsed_seconds(now)
        parts = [self.id, self.status]
        if self.exit_code is not None:
            parts.append(f"(exit {self.exit_code})")
        if elapsed is not None:
            parts.append(f"{'for' if not self.finished else 'after'} {format_seconds(elapsed)}")
        what = self.label
        if self.kind == "agent" and self.agent is not None:
            what = f"agent {self.agent.name}: {self.label}"
        return f"{' '.join(parts)}: {_one_line(what)}"


def format_seconds(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 120:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def _one_line(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def task_dir(bundle: Path, task_id: str) -> Path:
    return bundle / BACKGROUND_DIR / task_id


def read_record(bundle: Path, task_id: str) -> TaskRecord | None:
    """A task's record as it is on disk; None when it is missing or cannot be read (logged);
    a record found empty or torn reads as `lost_record`."""
    path = task_dir(bundle, task_id) / META_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("unreadable task record %s: %s", path, exc)
        return None
    try:
        return TaskRecord.model_validate(json.loads(data))
    except (ValueError, ValidationError):
        return lost_record(bundle, task_id)


def lost_record(bundle: Path, task_id: str) -> TaskRecord:
    """What a record found empty or torn stands for. Records are written whole (a rename),
    and synced, except a system task's before its final one (task.py): a power cut may leave
    one of those empty. So it was a system task's, unfinished: it reads as orphaned, with no
    more known of it."""
    return TaskRecord(
        id=task_id, session_id=bundle.name, kind="agent", system=True, status="running",
        label="(its record was lost: found empty or torn after a crash)",
    )


def task_names(bundle: Path) -> list[str]:
    """The task folders under background/ (records written or not); blocking."""
    try:
        return [e.name for e in (bundle / BACKGROUND_DIR).iterdir() if task_number(e.name)]
    except OSError:
        return []


def claim_task(bundle: Path, at_least: int) -> tuple[str, int]:
    """A new task's id: the first free `bg_<n>` from at_least and past every task folder in
    the bundle, its folder made by an exclusive mkdir (so no other process or pool ever gets
    the same id), and the descriptor holding the folder's lock while the task runs
    (running_elsewhere); blocking."""
    numbers = [task_number(name) or 0 for name in task_names(bundle)]
    number = max([at_least, *(n + 1 for n in numbers)])
    (bundle / BACKGROUND_DIR).mkdir(parents=True, exist_ok=True)
    while True:
        folder = task_dir(bundle, f"bg_{number}")
        try:
            folder.mkdir()
        except FileExistsError:  # another process took it since the listing
            number += 1
            continue
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # made here: nobody else holds it
        except BaseException:
            os.close(fd)
            raise
        return folder.name, fd


def release_task(fd: int) -> None:
    """Let the task's folder lock go: its record is final (or it never started)."""
    with contextlib.suppress(OSError):
        os.close(fd)


def abandon_task(bundle: Path, task_id: str, fd: int) -> None:
    """A claimed task that never started: its lock let go, its folder removed with what its
    claim wrote there (the number is free again); blocking."""
    release_task(fd)
    shutil.rmtree(task_dir(bundle, task_id), ignore_errors=True)


def running_elsewhere(folder: Path) -> bool:
    """Whether a process (or another pool) runs the task of that folder now: its lock is
    held. The kernel lets it go when that process ends, however it ends."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def read_task(bundle: Path, task_id: str) -> TaskRecord | None:
    """A record of a task this pool does not run, as a reader should see it (as_read), or
    None when there is none; blocking."""
    record = read_record(bundle, task_id)
    if record is None or record.id != task_id:
        return None
    live = not record.finished and running_elsewhere(task_dir(bundle, task_id))
    return as_read(record, live)


def read_tasks(bundle: Path, skip: Collection[str]) -> tuple[set[str], list[TaskRecord]]:
    """The task folders in the bundle, and the records of those not in skip as a reader
    should see them (in no order: the pool sorts them with its own); blocking."""
    names = task_names(bundle)
    records = [r for name in names if name not in skip and (r := read_task(bundle, name))]
    return set(names), records


def as_read(record: TaskRecord, live: bool) -> TaskRecord:
    """The record as a reader should see it: unfinished and run by no process means the
    process that ran it ended, so it reads as orphaned (the file is left as it is)."""
    if live or record.finished:
        return record
    return record.model_copy(update={"status": "orphaned"})
