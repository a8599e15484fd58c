"""The system prompt (templates) and the per-step turn context that follows the history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from acp_memory.llm.types import Message, ToolSpec

TURN_CONTEXT_OPEN = "<turn_context>"
# The opening line itself says what the block is, so no reader can take it for the user.
TURN_CONTEXT_NOTE = (
    "Runtime state supplied by acp-memory for this step; this is not a message from the user."
)


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

    def load(self, name: str) -> str:
        """The text of template `name` (e.g. "agent.md"); re-read so hand edits apply."""
        for folder in self._dirs:
            path = folder / name
            if path.is_file():
                return path.read_text(encoding="utf-8")
        raise FileNotFoundError(f"prompt template {name} not found in {self._dirs}")


def render_system(template: str, *, cwd: str, tools: Sequence[ToolSpec], memory: str) -> str:
    """Fill {{cwd}}, {{tools}} and {{memory}}; nothing that changes per turn goes in here."""
    tool_lines = "\n".join(f"- {t.name}: {t.description.splitlines()[0]}" for t in tools)
    values = {
        "cwd": cwd,
        "tools": tool_lines or "(no tools in this mode)",
        "memory": memory.strip() or "(none yet)",
    }
    out = template
    for key, value in values.items():
        out = out.replace("{{" + key + "}}", value)
    return out


@dataclass
class TurnContext:
    """Runtime state for one step; rebuilt each step and never persisted."""

    background_tasks: list[str] = field(default_factory=list)
    memory_report: str | None = None
    now: datetime | None = None

    def render(self) -> str:
        now = (self.now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        tasks = "\n".join(f"- {t}" for t in self.background_tasks) or "none running"
        parts = [
            f"{TURN_CONTEXT_OPEN} {TURN_CONTEXT_NOTE}",
            "",
            "## Current time (UTC)",
            now,
            "",
            "## Background tasks",
            tasks,
        ]
        if self.memory_report is not None:
            parts += ["", "## Long-term memory", self.memory_report.strip()]
        parts.append("</turn_context>")
        return "\n".join(parts)

    def message(self) -> Message:
        return Message(role="user", content=self.render())
