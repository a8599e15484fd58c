"""Helpers for consuming provider streams in tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio

from acp_memory.llm.types import (
    Finished,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
)


async def collect(
    events: AsyncIterator[StreamEvent], into: list[StreamEvent] | None = None
) -> list[StreamEvent]:
    """Every event of a stream; pass `into` to keep what arrived before an error."""
    got = [] if into is None else into
    async for event in events:
        got.append(event)
    return got


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def reasoning_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ReasoningDelta))


def calls_of(events: list[StreamEvent]) -> list[ToolCall]:
    return [e.call for e in events if isinstance(e, ToolCallReady)]


def finished(events: list[StreamEvent]) -> Finished:
    """The stream's Finished, checked to be its last event and its only one."""
    ends = [e for e in events if isinstance(e, Finished)]
    assert len(ends) == 1 and events[-1] is ends[0], events
    return ends[0]


class RecordingSleep:
    """Stands in for anyio.sleep in a retry policy: records the delays, waits for none."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await anyio.lowlevel.checkpoint()
