"""Print mode's stderr: the memory console lines, one line per tool call, failures, and on a
terminal a status line while something is under way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO

_DIM = "\x1b[2m"
_RESET = "\x1b[0m"
_CLEAR_LINE = "\r\x1b[2K"

# What a run that succeeded did, when its records say more than its update (printmode.memory):
# `saved`, `nothing found`, or `held 1 change for approval (pnd_…)`.
RunOutcome = str


def memory_line(update: dict[str, Any], outcome: RunOutcome | None = None) -> str | None:
    """The console line of a memory_run update (the seed's wording), None for `started`;
    a run that saved or deleted says saved, one that found no note says nothing found, one
    whose changes wait for approval says how many and their ids."""
    status = update.get("status")
    if status == "skipped":
        return f"memory: skipped - {update.get('reason', '')}"
    if status != "finished":
        return None
    took = f"{update.get('durationMs', 0) / 1000:.1f}s"
    task = f"(task {update.get('taskId')})"
    match update.get("taskStatus"):
        case "succeeded" if outcome is not None:
            return f"memory: {outcome} in {took} {task}"
        case "succeeded" if update.get("delivered"):
            return f"memory: recalled in {took} {task}"
        case "succeeded":
            return f"memory: finished in {took}, nothing reached this turn {task}"
        case "timed_out":
            return f"memory: timed out after {took} {task}"
        case "stopped":
            return f"memory: stopped after {took} {task}"
        case _:
            return f"memory: failed after {took} {task} - {update.get('reason', 'failed')}"


class Console:
    """Writes stderr for a person or a log: whole lines always; on a terminal, a status line
    that the next line (or the reply on stdout) replaces, and dim memory lines."""

    def __init__(self, err: TextIO, *, terminal: bool) -> None:
        self.err = err
        self.terminal = terminal
        self._status = False
        # Called before anything is written: stdout on the same terminal ends its line.
        self.before_line: Callable[[], None] | None = None
        # Whether the reply on stdout is mid-line; a line then waits for `line_start`, so that
        # with both streams in one file (2>&1) it never splits a line of the reply.
        self.mid_line: Callable[[], bool] | None = None
        self._waiting: list[str] = []

    def line(self, text: str, *, dim: bool = False) -> None:
        self.clear_status()
        if self.before_line is not None:
            self.before_line()
        if dim and self.terminal:
            text = f"{_DIM}{text}{_RESET}"
        if self.mid_line is not None and self.mid_line():
            self._waiting.append(text)
            return
        self._write(text)

    def line_start(self) -> None:
        """The reply on stdout is at the start of a line: the lines that waited for it."""
        waiting, self._waiting = self._waiting, []
        for text in waiting:
            self._write(text)

    def _write(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()

    def error(self, text: str) -> None:
        """The one line a failure gets, prefixed with the program's name."""
        self.line(f"acp-memory: {text}")

    def memory(self, update: dict[str, Any], outcome: RunOutcome | None = None) -> None:
        """A memory_run update: a status while it runs, one dim line when it settles."""
        line = memory_line(update, outcome)
        if line is not None:
            self.line(line, dim=True)
        elif update.get("status") == "started":
            self.status(f"memory: working (task {update.get('taskId')})")

    def status(self, text: str) -> None:
        """Show what is under way, on a terminal only (a log would keep every frame)."""
        if not self.terminal:
            return
        if self.before_line is not None:
            self.before_line()
        self.err.write(f"{_CLEAR_LINE}{_DIM}{text}…{_RESET}")
        self.err.flush()
        self._status = True

    def clear_status(self) -> None:
        if self._status:
            self.err.write(_CLEAR_LINE)
            self.err.flush()
            self._status = False
