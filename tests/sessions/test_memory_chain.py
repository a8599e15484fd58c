"""The memory model chain (`ChainProvider`): which model it asks, and that it lets go of the
stream it is reading from."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio
import pytest

from acp_memory.config.models import ModelConfig
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import ChatRequest, Finished, LLMError, StreamEvent, TextDelta, Usage
from acp_memory.runtime.memory_run import ChainProvider

pytestmark = pytest.mark.anyio


class ScriptedModel:
    """A provider that fails before any output while `failing`, else streams two words; it
    records each call and whether its stream was closed."""

    def __init__(self, name: str, *, failing: bool = False) -> None:
        self.name = name
        self.failing = failing
        self.calls = 0
        self.closed = 0

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        self.calls += 1
        try:
            if self.failing:
                raise LLMError("402 Payment Required: subscription expired", status=402)
            yield TextDelta("hello ")
            yield TextDelta("there")
            yield Finished("stop", Usage())
        finally:
            self.closed += 1


def chain_of(*models: ScriptedModel) -> ChainProvider:
    handles = [
        ModelHandle(f"fake/{m.name}", m, ModelConfig(model=f"fake/{m.name}")) for m in models
    ]
    return ChainProvider(handles, max_tokens=100)


def request() -> ChatRequest:
    return ChatRequest(model="", messages=[])


async def drain(chain: ChainProvider) -> list[StreamEvent]:
    with anyio.fail_after(5):
        return [event async for event in chain.stream(request())]


async def test_the_chain_keeps_asking_the_model_that_answered():
    cheap, backup = ScriptedModel("cheap", failing=True), ScriptedModel("backup")
    chain = chain_of(cheap, backup)
    await drain(chain)
    await drain(chain)
    # The run's second request goes straight to the model that answered the first.
    assert (cheap.calls, backup.calls) == (1, 2)


async def test_the_chain_closes_the_inner_stream_when_its_reader_stops_early():
    model = ScriptedModel("only")
    events = chain_of(model).stream(request())
    with anyio.fail_after(5):
        assert await anext(events) == TextDelta("hello ")
        # What a cancel, a stop or a timeout of the run does to the stream it was reading.
        await events.aclose()
    assert model.closed == 1  # at once, not whenever the garbage collector gets to it
