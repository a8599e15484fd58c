"""The one interface every model provider implements."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from acp_memory.llm.types import ChatRequest, StreamEvent


class Provider(Protocol):
    """A chat model behind some API; stream() yields deltas, tool calls, then one Finished."""

    name: str

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]: ...
