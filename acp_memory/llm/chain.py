"""The memory model chain as one provider: a decorator over several models, beside
`resilient.py`, that moves on to the next model when a call fails before any output."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from dataclasses import replace

from acp_memory.llm.provider import closing
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import ChatRequest, LLMError, StreamEvent

log = logging.getLogger(__name__)


class ChainProvider:
    """The memory model chain as one provider: a call that failed before any output moves on
    to the next model; one that broke after output is not retried here (never stream twice).
    The first model that answered is kept for the rest of the run."""

    def __init__(self, handles: list[ModelHandle], max_tokens: int) -> None:
        self.handles = handles
        self.max_tokens = max_tokens  # every call's cap: the model's own, at most this
        self.name = "memory chain"
        self._at = 0

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        last: LLMError | None = None
        for index in range(self._at, len(self.handles)):
            handle = self.handles[index]
            cfg = handle.config
            ask = replace(
                request,
                model=cfg.upstream_id,
                max_tokens=min(cfg.max_tokens, self.max_tokens),
                temperature=cfg.temperature,
                stream=cfg.stream,
            )
            produced = False
            try:
                # Closed on the way out (a cancel, a stop, a timeout), so that its HTTP stream
                # stops at once rather than when the garbage collector finds it.
                events = handle.stream(ask)
                async with closing(events):
                    async for event in events:
                        produced = True
                        yield event
                self._at = index
                return
            except LLMError as err:
                if produced or err.after_output:
                    raise
                log.warning("memory model %s failed before any output: %s", handle.model_id, err)
                last = err
        assert last is not None
        raise last
