"""The one interface every model provider implements."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

from acp_memory.llm.types import ChatRequest, StreamEvent


class Provider(Protocol):
    """A chat model behind some API; stream() yields deltas, tool calls, then one Finished."""

    name: str

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]: ...


@asynccontextmanager
async def closing(events: AsyncIterator[Any]) -> AsyncGenerator[None, None]:
    """Close an event iterator on the way out, so its HTTP stream stops at once."""
    try:
        yield
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
