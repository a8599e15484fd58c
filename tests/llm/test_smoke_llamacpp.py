"""A real tiny model (llama.cpp + SmolLM2-135M) through the OpenAI provider: structure only."""

from __future__ import annotations

import anyio
import httpx
import pytest
from fakes.llamacpp import llamacpp_server, llamacpp_unavailable
from fakes.streams import collect, finished, text_of

from acp_memory.llm.openai import OpenAIProvider
from acp_memory.llm.resilient import ResilientProvider, RetryPolicy
from acp_memory.llm.transport import StreamTimeouts
from acp_memory.llm.types import (
    ChatRequest,
    Finished,
    Message,
    ReasoningDelta,
    TextDelta,
    ToolCallReady,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.smoke,
    pytest.mark.skipif(llamacpp_unavailable() is not None, reason=llamacpp_unavailable() or ""),
]


@pytest.mark.parametrize("stream", [True, False])
async def test_a_real_model_streams_well_formed_events(stream: bool) -> None:
    async with llamacpp_server() as base_url, httpx.AsyncClient() as client:
        provider = ResilientProvider(
            OpenAIProvider(
                client, name="llamacpp", api_base=base_url, timeouts=StreamTimeouts(30, 30)
            ),
            RetryPolicy(max_retries=0),
        )
        request = ChatRequest(
            "smollm2",
            [Message("system", "You are a helpful assistant."), Message("user", "Say hello.")],
            max_tokens=24,
            temperature=0,
            stream=stream,
        )
        with anyio.fail_after(60):
            events = await collect(provider.stream(request))

    assert all(isinstance(e, TextDelta | ReasoningDelta | ToolCallReady | Finished) for e in events)
    assert text_of(events).strip()
    assert finished(events).reason in ("stop", "length")
    usage = finished(events).usage
    assert usage is not None and usage.input_tokens > 0 and usage.output_tokens > 0
