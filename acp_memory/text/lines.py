"""The one cut of a line that people read in a list: a session's title, a task's label, a log
line, a provider's answer quoted in an error."""

from __future__ import annotations

LABEL_CHARS = 60  # a session's title and a task's label alike


def first_line(text: str, limit: int = LABEL_CHARS) -> str:
    """The first non-blank line of text, cut to limit characters and then `…`."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit] + "…"
