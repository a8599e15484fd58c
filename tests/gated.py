"""An in-process provider a test can hold mid-turn, to prove concurrency and cancellation."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
from acp import text_block

from acp_memory.acp.agent import AcpAgent
from acp_memory.acp.server import build_agent
from acp_memory.config import Config, Paths
from acp_memory.config.models import ModelConfig
from acp_memory.llm.provider import Provider
from acp_memory.llm.registry import ModelHandle, ProviderHub
from acp_memory.llm.types import ChatRequest, Finished, StreamEvent, TextDelta


class Gate:
    """A point a test holds work at: `started` when reached, `release` to go on."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.cancelled = anyio.Event()

    async def hold(self) -> None:
        self.started.set()
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise


class GatedProvider(Gate):
    """Streams "partial ", then waits for `release` before finishing the reply."""

    name = "gated"

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        yield TextDelta("partial ")
        await self.hold()
        yield TextDelta("done")
        yield Finished("stop")


@contextlib.asynccontextmanager
async def prompt_in_flight(ed: Any, sid: str, gate: Gate, text: str = "go") -> AsyncIterator[dict]:
    """A prompt running until `gate` is reached; its answer is in the dict once the block ends."""
    result: dict[str, Any] = {}

    async def run() -> None:
        result["resp"] = await ed.conn.prompt(session_id=sid, prompt=[text_block(text)])

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(5):
            await gate.started.wait()
        yield result


def gated_agent(cfg: Config, paths: Paths, provider: Provider) -> AcpAgent:
    """The real agent, with every model resolved to `provider`."""
    agent = build_agent(cfg, paths, ProviderHub(cfg))
    agent.runner.model_for = lambda model_id: ModelHandle(
        model_id, provider, ModelConfig(model=model_id)
    )
    return agent
