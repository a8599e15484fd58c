"""How the offline model writes, as the main agent and as the memory child: its tool calls
(ids, the `Calling …` line, arguments read back) and quotes cut to a length."""

from __future__ import annotations

import json
from collections.abc import Sequence

from acp_memory.llm.types import ToolCall


def numbered_calls(step: int, calls: Sequence[tuple[str, str]]) -> list[ToolCall]:
    """Tool calls from (name, JSON arguments), with ids unique to this step of the run."""
    return [ToolCall(f"offline_{step}_{i}", name, args) for i, (name, args) in enumerate(calls)]


def announce(calls: list[ToolCall]) -> str:
    """The text that goes with tool calls: `Calling NAME {args}, ….`"""
    names = ", ".join(f"{c.name} {json.dumps(arguments(c), ensure_ascii=False)}" for c in calls)
    return f"Calling {names}."


def arguments(call: ToolCall) -> object:
    """A call's arguments as JSON values; the raw text when it is not JSON."""
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments


def clip(text: str, limit: int = 120) -> str:
    """text, cut after `limit` characters with an ellipsis."""
    return text if len(text) <= limit else text[:limit] + "…"
