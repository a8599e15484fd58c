"""An in-process provider a test can hold mid-turn, to prove concurrency and cancellation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio

from acp_memory.acp.agent import AcpAgent
from acp_memory.acp.server import build_agent
from acp_memory.config import Config, Paths
from acp_memory.config.models import ModelConfig
from acp_memory.llm.provider import Provider
from acp_memory.llm.registry import ModelHandle, ProviderHub
from acp_memory.llm.types import ChatRequest, Finished, StreamEvent, TextDelta


class GatedProvider:
    """Streams "partial ", then waits for `release` before finishing the reply."""

    name = "gated"

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.cancelled = anyio.Event()

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        yield TextDelta("partial ")
        self.started.set()
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise
        yield TextDelta("done")
        yield Finished("stop")


def gated_agent(cfg: Config, paths: Paths, provider: Provider) -> AcpAgent:
    """The real agent, with every model resolved to `provider`."""
    agent = build_agent(cfg, paths, ProviderHub(cfg))
    agent.model_for = lambda model_id: ModelHandle(model_id, provider, ModelConfig(model=model_id))
    return agent
