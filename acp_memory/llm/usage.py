"""Token counts of a turn, read off the model calls as their streams finish."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from acp_memory.config.models import ModelPrice
from acp_memory.llm.provider import Provider, closing
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import ChatRequest, Finished, StreamEvent, Usage

# Told of each answered call of a metered handle: its Finished event, with the usage its
# provider reported (or why that was void).
Answered = Callable[[Finished], Awaitable[None]]
PER_MILLION = 1_000_000
log = logging.getLogger(__name__)


def void_line(model_id: str, why: str) -> str:
    """The log line of an answer whose usage numbers were voided (said once per session)."""
    return (f"ignoring the usage model {model_id} reported: {why} (no usage_update, no cost, "
            "not in the turn's usage; said once per session)")


class UsageMeter:
    """Sums the usage that the providers report in each call's Finished event. A model call
    counts once it answered (a call that failed reports no usage, and is billed none)."""

    def __init__(self) -> None:
        self.model_calls = 0
        self.input_tokens = 0  # the whole prompt, its cached part included
        self.output_tokens = 0
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0
        self.void_told = False  # a meter heard by no one (a memory run's) logs a void once

    def wrap(self, handle: ModelHandle, answered: Answered | None = None) -> ModelHandle:
        """The same model, its calls metered; `answered` hears of each once it is counted."""
        metered = _Metered(handle, self, answered)
        return ModelHandle(handle.model_id, metered, handle.config)

    def as_json(self) -> dict[str, int]:
        """The tokens in ACP's `Usage` shape (the prompt answer's, print mode's result)."""
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cachedReadTokens": self.cache_read_tokens,
            "cachedWriteTokens": self.cache_write_tokens,
            "totalTokens": self.input_tokens + self.output_tokens,
        }

    def add(self, usage: Usage | None) -> None:
        """One answered call, with the usage its provider reported (None: it reported none)."""
        self.model_calls += 1
        if usage is not None:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cache_read_tokens += usage.cache_read_tokens
            self.cache_write_tokens += usage.cache_write_tokens


def call_cost(usage: Usage, price: ModelPrice) -> float:
    """What one call cost at `price` (per million tokens): its cached input at the cached
    price, the rest of the input (cache writes included) at the input price."""
    cached = min(usage.cache_read_tokens, usage.input_tokens)
    cached_price = price.input if price.cached_input is None else price.cached_input
    return (
        (usage.input_tokens - cached) * price.input
        + cached * cached_price
        + usage.output_tokens * price.output
    ) / PER_MILLION


class _Metered:
    def __init__(self, handle: ModelHandle, meter: UsageMeter, answered: Answered | None) -> None:
        self.provider: Provider = handle.provider
        self.model_id = handle.model_id
        self.meter = meter
        self.answered = answered
        self.name = self.provider.name

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        events = self.provider.stream(request)
        async with closing(events):
            async for event in events:
                if isinstance(event, Finished):
                    self.meter.add(event.usage)  # a void usage is None: no tokens counted
                    if self.answered is not None:
                        await self.answered(event)
                    elif event.usage_void and not self.meter.void_told:
                        self.meter.void_told = True
                        log.warning("%s", void_line(self.model_id, event.usage_void))
                yield event
