"""Token counts of a turn, read off the model calls as their streams finish."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from acp_memory.config.models import ModelPrice
from acp_memory.llm.provider import Provider, closing
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import ChatRequest, Finished, StreamEvent, Usage

# Told of each answered call of a metered handle, with the usage its provider reported.
Answered = Callable[[Usage | None], Awaitable[None]]
PER_MILLION = 1_000_000


class UsageMeter:
    """Sums the usage that the providers report in each call's Finished event. A model call
    counts once it answered (a call that failed reports no usage, and is billed none)."""

    def __init__(self) -> None:
        self.model_calls = 0
        self.input_tokens = 0  # the whole prompt, its cached part included
        self.output_tokens = 0
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0

    def wrap(self, handle: ModelHandle, answered: Answered | None = None) -> ModelHandle:
        """The same model, its calls metered; `answered` hears of each once it is counted."""
        metered = _Metered(handle.provider, self, answered)
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
    def __init__(self, provider: Provider, meter: UsageMeter, answered: Answered | None) -> None:
        self.provider = provider
        self.meter = meter
        self.answered = answered
        self.name = provider.name

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        events = self.provider.stream(request)
        async with closing(events):
            async for event in events:
                if isinstance(event, Finished):
                    self.meter.add(event.usage)
                    if self.answered is not None:
                        await self.answered(event.usage)
                yield event
