"""Token counts of a turn, read off the model calls as their streams finish."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from acp_memory.llm.provider import Provider, closing
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import ChatRequest, Finished, StreamEvent, Usage


class UsageMeter:
    """Sums the usage that the providers report in each call's Finished event. A model call
    counts once it answered (a call that failed reports no usage, and is billed none)."""

    def __init__(self) -> None:
        self.model_calls = 0
        self.input_tokens = 0  # the whole prompt, its cached part included
        self.output_tokens = 0
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0

    def around(self, model_for: Callable[[str], ModelHandle]) -> Callable[[str], ModelHandle]:
        """model_for whose handles are metered."""

        def metered(model_id: str) -> ModelHandle:
            return self.wrap(model_for(model_id))

        return metered

    def wrap(self, handle: ModelHandle) -> ModelHandle:
        """The same model, its calls metered."""
        return ModelHandle(handle.model_id, _Metered(handle.provider, self), handle.config)

    def as_json(self) -> dict[str, int]:
        """The tokens as print mode's result gives them."""
        return {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens}

    def add(self, usage: Usage | None) -> None:
        """One answered call, with the usage its provider reported (None: it reported none)."""
        self.model_calls += 1
        if usage is not None:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cache_read_tokens += usage.cache_read_tokens
            self.cache_write_tokens += usage.cache_write_tokens


class _Metered:
    def __init__(self, provider: Provider, meter: UsageMeter) -> None:
        self.provider = provider
        self.meter = meter
        self.name = provider.name

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        events = self.provider.stream(request)
        async with closing(events):
            async for event in events:
                if isinstance(event, Finished):
                    self.meter.add(event.usage)
                yield event
