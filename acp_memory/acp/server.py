"""Assembles the agent: config, engine and ACP handlers over one JSON-RPC connection."""

from __future__ import annotations

import logging
from functools import partial

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from acp_memory.acp.agent import AcpAgent, unconfigured_handlers
from acp_memory.config import Config, Paths
from acp_memory.engine.prompt import Templates
from acp_memory.engine.turn import TurnEngine
from acp_memory.jsonrpc.connection import Connection
from acp_memory.llm.registry import ProviderHub
from acp_memory.memory.direct import DirectMemoryTool
from acp_memory.sessions.runner import SessionRunner
from acp_memory.tools.agents import SpawnAgent
from acp_memory.tools.background import BACKGROUND_TOOLS
from acp_memory.tools.command import RunCommand
from acp_memory.tools.edit import EditFile, WriteFile
from acp_memory.tools.files import ListDirectory, ReadFile
from acp_memory.tools.plan import WritePlan
from acp_memory.tools.registry import ToolRegistry
from acp_memory.tools.search import Glob, Grep

log = logging.getLogger(__name__)


def build_engine(cfg: Config, paths: Paths | None = None) -> TurnEngine:
    """The turn engine with the configured templates and the main agent's tools; with
    memory.inline, Kodik's `memory` tool too, whose global root needs `paths`."""
    tools = ToolRegistry(
        [
            ReadFile(),
            ListDirectory(),
            Glob(),
            Grep(),
            WriteFile(),
            EditFile(),
            WritePlan(),
            RunCommand(),
            *(tool() for tool in BACKGROUND_TOOLS),
            SpawnAgent(),
        ]
    )
    if cfg.memory.inline:
        if paths is None:
            raise ValueError("memory.inline needs the home folder's paths for its memory tool")
        tools.add(DirectMemoryTool(cfg, paths))
    return TurnEngine(Templates(cfg.prompts.dir), tools, cfg.agent.max_turns)


def build_runner(cfg: Config, paths: Paths, hub: ProviderHub) -> SessionRunner:
    """The session runner of one surface: engine, models, tool services."""
    engine = build_engine(cfg, paths)
    return SessionRunner(
        cfg, paths, engine, hub.model, partial(hub.model, wait_for_limit_reset=False)
    )


def build_agent(cfg: Config, paths: Paths, hub: ProviderHub) -> AcpAgent:
    """The agent with its runner, not yet connected."""
    return AcpAgent(build_runner(cfg, paths, hub))


async def serve(
    receive: ByteReceiveStream,
    send: ByteSendStream,
    cfg: Config,
    paths: Paths,
    agent: AcpAgent | None = None,
    stop: anyio.Event | None = None,
) -> None:
    """Serve ACP on a pair of byte streams until the input ends or `stop` is set (a stop
    signal: the connection ends at once, the memory runs get their bounded wait)."""
    async with ProviderHub(cfg) as hub:
        agent = agent or build_agent(cfg, paths, hub)
        conn = Connection(receive, send, agent.handlers(), on_input_closed=agent.cancel_all)
        agent.peer = conn
        async with agent.runner.running():
            try:
                async with anyio.create_task_group() as front:
                    if stop is not None:
                        front.start_soon(cancel_when_set, stop, front.cancel_scope)
                    await conn.serve()
                    front.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):
                    await agent.runner.drain_memory_runs()
                agent.close()
    if stop is None or not stop.is_set():  # a signal's stop is the user's own: no news
        log.info("input closed; agent stopped")


async def cancel_when_set(event: anyio.Event, scope: anyio.CancelScope) -> None:
    """Cancel `scope` once `event` is set (a stop signal ending a surface's front door)."""
    await event.wait()
    scope.cancel()


async def serve_unconfigured(
    receive: ByteReceiveStream, send: ByteSendStream, problem: str
) -> None:
    """Serve ACP with a config that failed to load: initialize works, sessions say why not."""
    log.error("config error: %s", problem)
    await Connection(receive, send, unconfigured_handlers(problem)).serve()
