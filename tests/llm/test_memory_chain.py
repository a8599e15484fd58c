"""The memory model chain (`ChainProvider`): which model it asks, each call's token cap, and that
it lets go of the stream it is reading from."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio
import pytest

from acp_memory.config.models import ModelConfig
from acp_memory.llm.chain import ChainProvider
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import ChatRequest, Finished, LLMError, StreamEvent, TextDelta, Usage

pytestmark = pytest.mark.anyio


class ScriptedModel:
    """A provider that fails before any output while `failing`, else streams two words; it
    records each call and whether its stream was closed."""

    def __init__(self, name: str, *, failing: bool = False) -> None:
        self.name = name
        self.failing = failing
        self.calls = 0
        self.closed = 0
        self.requests: list[ChatRequest] = []

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        self.calls += 1
        self.requests.append(request)
        try:
            if self.failing:
                raise LLMError("402 Payment Required: subscription expired", status=402)
            yield TextDelta("hello ")
            yield TextDelta("there")
            yield Finished("stop", Usage())
        finally:
            self.closed += 1


def chain_of(
    *models: ScriptedModel, max_tokens: int = 100, max_tokens_of: dict[str, int] | None = None
) -> ChainProvider:
    """A chain over models, each with its own max_tokens when max_tokens_of names it."""
    own = max_tokens_of or {}
    handles = []
    for m in models:
        cfg = ModelConfig(model=f"fake/{m.name}")
        if m.name in own:
            cfg = cfg.model_copy(update={"max_tokens": own[m.name]})
        handles.append(ModelHandle(cfg.model, m, cfg))
    return ChainProvider(handles, max_tokens=max_tokens)


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


async def test_each_call_is_capped_at_the_chain_cap_or_the_models_own_max_tokens():
    # The chain's cap is memory.copilot_max_tokens (4096 here): a model allowing less keeps
    # its own cap, one allowing more (8192 by default) gets the chain's.
    large, small = ScriptedModel("large"), ScriptedModel("small")
    await drain(chain_of(large, max_tokens=4096, max_tokens_of={"large": 2000}))
    await drain(chain_of(small, max_tokens=4096))
    assert [r.max_tokens for r in large.requests] == [2000]
    assert [r.max_tokens for r in small.requests] == [4096]
