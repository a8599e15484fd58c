"""What a session's next model step hears of its background tasks: each end once, one line."""

from __future__ import annotations

from acp_memory.tasks.records import TaskRecord


class Announcements:
    """One line per task that ended, kept until the next model step takes it; a system
    task's end is never announced."""

    def __init__(self) -> None:
        self._lines: dict[str, str] = {}  # task id -> its line, in finishing order

    def ended(self, record: TaskRecord) -> None:
        """A task ended: its line waits for the next step."""
        if not record.system:
            self._lines[record.id] = record.summary()

    def take(self) -> list[str]:
        """One line per task that ended since the last call."""
        lines = list(self._lines.values())
        self._lines = {}
        return lines

    def acknowledge(self, task_id: str) -> None:
        """The model already read how this task ended (a tool result said so), or the task
        is gone: no need to announce it."""
        self._lines.pop(task_id, None)
