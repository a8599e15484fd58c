"""The session modes, in one place: their ids (a Literal, for pydantic and the OpenAPI
document), and the name and description an editor shows for each."""

from __future__ import annotations

from typing import Literal, get_args

Mode = Literal["agent", "plan", "ask"]
MODES: tuple[str, ...] = get_args(Mode)
MODE_LABELS: dict[str, tuple[str, str]] = {
    "agent": ("Agent", "Reads and changes the workspace with every tool."),
    "plan": ("Plan", "Reads and answers with a plan; changes nothing."),
    "ask": ("Ask", "Answers questions; read-only."),
}


def unknown_mode(mode: str) -> str:
    """The one line that refuses a mode id."""
    return f"unknown mode {mode!r}; use {', '.join(MODES[:-1])} or {MODES[-1]}"
