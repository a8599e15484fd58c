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


def build_engine(cfg: Config) -> TurnEngine:
    """The turn engine with the configured templates and the main agent's tools."""
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
    return TurnEngine(Templates(cfg.prompts.dir), tools, cfg.agent.max_turns)


def build_runner(cfg: Config, paths: Paths, hub: ProviderHub) -> SessionRunner:
    """The session runner of one surface: engine, models, tool services."""
    return SessionRunner(
        cfg, paths, build_engine(cfg), hub.model, partial(hub.model, wait_for_limit_reset=False)
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
) -> None:
    """Serve ACP on a pair of byte streams until the input ends."""
    async with ProviderHub(cfg) as hub:
        agent = agent or build_agent(cfg, paths, hub)
        conn = Connection(receive, send, agent.handlers(), on_input_closed=agent.cancel_all)
        agent.peer = conn
        async with agent.runner.running():
            try:
                await conn.serve()
            finally:
                with anyio.CancelScope(shield=True):
                    await agent.runner.drain_memory_runs()
                agent.close()
    log.info("input closed; agent stopped")


async def serve_unconfigured(
    receive: ByteReceiveStream, send: ByteSendStream, problem: str
) -> None:
    """Serve ACP with a config that failed to load: initialize works, sessions say why not."""
    log.error("config error: %s", problem)
    await Connection(receive, send, unconfigured_handlers(problem)).serve()
