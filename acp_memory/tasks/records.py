"""Task records: `background/<taskId>/meta.json`, snake_case as the reference agent writes it."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from acp_memory.atomic import write_json_atomic

log = logging.getLogger(__name__)

BACKGROUND_DIR = "background"
META_FILE = "meta.json"
LOG_FILE = "output.log"
TASK_ID = re.compile(r"^bg_([1-9][0-9]*)$")

Status = Literal["queued", "running", "succeeded", "failed", "timed_out", "stopped", "orphaned"]
Kind = Literal["command", "agent"]
UNFINISHED: frozenset[str] = frozenset({"queued", "running"})


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
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


class TaskRecord(BaseModel):
    """One task as meta.json holds it. `agent` is written for agent tasks only."""

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

    @property
    def finished(self) -> bool:
        return self.status not in UNFINISHED

    def dump(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
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
        end = parse_time(self.finished_at) if self.finished else (now or datetime.now(UTC))
        return max(0.0, ((end or start) - start).total_seconds())

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


def write_record(bundle: Path, record: TaskRecord) -> None:
    """meta.json, atomically (blocking: call it from a worker thread)."""
    write_json_atomic(task_dir(bundle, record.id) / META_FILE, record.dump())


def read_record(bundle: Path, task_id: str) -> TaskRecord | None:
    """A task's record as it is on disk, or None when it is missing or unreadable (logged)."""
    path = task_dir(bundle, task_id) / META_FILE
    try:
        return TaskRecord.model_validate(json.loads(path.read_bytes()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, ValidationError) as exc:
        log.warning("unreadable task record %s: %s", path, exc)
        return None


def scan_records(bundle: Path) -> tuple[int, list[TaskRecord]]:
    """The highest task number under background/ (records unreadable or not) and every
    readable record; blocking."""
    folder = bundle / BACKGROUND_DIR
    highest = 0
    records: list[TaskRecord] = []
    try:
        names = [entry.name for entry in folder.iterdir()]
    except OSError:
        return 0, []
    for name in names:
        number = task_number(name)
        if number is None:
            continue
        highest = max(highest, number)
        record = read_record(bundle, name)
        if record is not None and record.id == name:
            records.append(record)
    records.sort(key=lambda r: task_number(r.id) or 0)
    return highest, records


def as_read(record: TaskRecord, live: bool) -> TaskRecord:
    """The record as a reader should see it: unfinished and not live in this process means
    the process that ran it ended, so it reads as orphaned (the file is left as it is)."""
    if live or record.finished:
        return record
    return record.model_copy(update={"status": "orphaned"})
