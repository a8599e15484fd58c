"""The system prompt (templates) and the per-step turn context that follows the history."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path

from acp_memory.llm.types import Message, ToolSpec
from acp_memory.timestamps import iso, utc_now

TURN_CONTEXT_OPEN = "<turn_context>"
# The opening line itself says what the block is, so no reader can take it for the user.
TURN_CONTEXT_NOTE = (
    "Runtime state supplied by acp-memory for this step; this is not a message from the user."
)


# A template file changed this recently is not cached (see Templates.load).
RACY_NS = 1_000_000_000


def _builtin_dir() -> Path:
    # Installed wheels carry the templates as package data; a source checkout keeps them at
    # the top-level prompts/ folder.
    packaged = Path(str(resources.files("acp_memory"))) / "prompts"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "prompts"


class Templates:
    """Loads prompt templates, preferring prompts.dir over the built-in ones."""

    def __init__(self, override_dir: str = "") -> None:
        self._dirs = [Path(override_dir)] if override_dir else []
        self._dirs.append(_builtin_dir())
        # name -> the file load read it from, that file's stat key then, and its text.
        self._read: dict[str, tuple[Path, tuple[int, int, int], str]] = {}

    def load(self, name: str) -> str:
        """The text of template `name` (e.g. "agent.md"); re-read so hand edits apply."""
        for folder in self._dirs:
            path = folder / name
            if path.is_file():
                key = _stat_key(path)  # before the read: a change after it reads again
                text = path.read_text(encoding="utf-8")
                # A file changed within the last second may change again inside the same
                # timestamp tick, unseen by a stat: it is kept only once it is older.
                if key is not None and time.time_ns() - key[2] > RACY_NS:
                    self._read[name] = (path, key, text)
                return text
        raise FileNotFoundError(f"prompt template {name} not found in {self._dirs}")

    def cached(self, name: str) -> str | None:
        """What load last read for `name` while that file is unchanged and no folder before
        it has one now (a stat per folder, cheap enough for the event loop); else None."""
        seen = self._read.get(name)
        if seen is None:
            return None
        path, key, text = seen
        for folder in self._dirs:
            here = folder / name
            if here == path:
                return text if _stat_key(path) == key else None
            if here.is_file():  # an override added since
                return None
        return None


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


# Placeholders a template under prompts.dir may print. A template that uses one gives up the
# stable cached head: its system message is rendered again at every step with that step's
# values, and its turn context then carries the memory report alone.
STEP_PLACEHOLDERS = ("{{now}}", "{{background_tasks}}")
_SLOT = re.compile(r"\{\{(\w+)\}\}")


def is_per_step(template: str) -> bool:
    """Whether a template prints per-step values ({{now}}, {{background_tasks}})."""
    return any(slot in template for slot in STEP_PLACEHOLDERS)


def render_system(
    template: str,
    *,
    cwd: str,
    tools: Sequence[ToolSpec],
    memory: str,
    step: TurnContext | None = None,
    additional_directories: Sequence[str] = (),
) -> str:
    """Fill {{cwd}} (with the session's additional directories on the next line), {{tools}}
    and {{memory}}, and with `step` a per-step template's {{now}} and {{background_tasks}};
    the memory report never goes in here."""
    tool_lines = "\n".join(f"- {t.name}: {t.description.splitlines()[0]}" for t in tools)
    also = ", ".join(additional_directories)
    values = {
        "cwd": f"{cwd}\nAlso in the workspace: {also}" if also else cwd,
        "tools": tool_lines or "(no tools in this mode)",
        "memory": memory.strip() or "(none yet)",
    }
    if step is not None:
        values["now"] = step.time_text()
        values["background_tasks"] = step.tasks_text()
    # One pass, so a value that happens to contain "{{now}}" stays as it is.
    return _SLOT.sub(lambda m: values.get(m[1], m[0]), template)


@dataclass
class TurnContext:
    """Runtime state for one step; rebuilt each step and never persisted."""

    background_tasks: list[str] = field(default_factory=list)
    memory_report: str | None = None
    now: datetime | None = None
    # What SessionStart (first turn) and UserPromptSubmit hooks printed, for every step.
    hook_output: list[str] = field(default_factory=list)

    def time_text(self) -> str:
        return iso(self.now or utc_now(), timespec="seconds")

    def tasks_text(self) -> str:
        return "\n".join(f"- {t}" for t in self.background_tasks) or "none running"

    def message(self) -> Message:
        """The whole block: the time and the background tasks, then the sections below."""
        return _block(
            [
                "",
                "## Current time (UTC)",
                self.time_text(),
                "",
                "## Background tasks",
                self.tasks_text(),
                *self._sections(),
            ]
        )

    def memory_message(self) -> Message | None:
        """The block of a per-step template (its system message has the time and the tasks):
        the hooks' output and the memory report alone, or no block at all without them."""
        sections = self._sections()
        return _block(sections) if sections else None

    def _sections(self) -> list[str]:
        """The parts only some turns have: the hooks' output, then the memory report."""
        parts: list[str] = []
        if self.hook_output:
            parts += ["", "## From hooks", "\n\n".join(self.hook_output)]
        if self.memory_report is not None:
            parts += ["", "## Long-term memory", self.memory_report.strip()]
        return parts


def _block(lines: list[str]) -> Message:
    text = "\n".join([f"{TURN_CONTEXT_OPEN} {TURN_CONTEXT_NOTE}", *lines, "</turn_context>"])
    return Message(role="user", content=text)
