"""Assembles the agent: config, engine and ACP handlers over one JSON-RPC connection."""

from __future__ import annotations

import logging

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from acp_memory.acp.agent import AcpAgent
from acp_memory.acp.handshake import unconfigured_handlers
from acp_memory.build import build_runner
from acp_memory.config import Config, Paths
from acp_memory.jsonrpc.connection import Connection
from acp_memory.llm.registry import ProviderHub
from acp_memory.signals import cancel_when_set

log = logging.getLogger(__name__)


def build_agent(
    cfg: Config, paths: Paths, hub: ProviderHub, first_session_id: str | None = None
) -> AcpAgent:
    """The agent with its runner, not yet connected; the first session/new opens or creates
    `first_session_id` when given."""
    return AcpAgent(build_runner(cfg, paths, hub), first_session_id)


async def serve(
    receive: ByteReceiveStream,
    send: ByteSendStream,
    cfg: Config,
    paths: Paths,
    agent: AcpAgent | None = None,
    stop: anyio.Event | None = None,
    session_id: str | None = None,
) -> None:
    """Serve ACP on a pair of byte streams until the input ends or `stop` is set (a stop
    signal: the connection ends at once, the memory runs get their bounded wait).
    `session_id` is the session the first session/new opens (`acp --session-id`)."""
    async with ProviderHub(cfg) as hub:
        agent = agent or build_agent(cfg, paths, hub, session_id)
        conn = Connection(receive, send, agent.handlers(), on_input_closed=agent.cancel_all)
        agent.peer = conn
        # The connection owns the timer that lets its idle sessions go.
        async with agent.runner.running(), agent.table.releasing():
            try:
                await _serve_until(conn, stop)
            finally:
                with anyio.CancelScope(shield=True):
                    await agent.runner.memory.drain()
                agent.close()
    if stop is None or not stop.is_set():  # a signal's stop is the user's own: no news
        log.info("input closed; agent stopped")


async def serve_unconfigured(
    receive: ByteReceiveStream,
    send: ByteSendStream,
    problem: str,
    stop: anyio.Event | None = None,
) -> None:
    """Serve ACP with a config that failed to load: initialize works, sessions say why not
    (the caller has said it on stderr)."""
    await _serve_until(Connection(receive, send, unconfigured_handlers(problem)), stop)


async def _serve_until(conn: Connection, stop: anyio.Event | None) -> None:
    """Serve until the input ends or `stop` is set (then the connection ends at once)."""
    async with anyio.create_task_group() as front:
        if stop is not None:
            front.start_soon(cancel_when_set, stop, front.cancel_scope)
        await conn.serve()
        front.cancel_scope.cancel()
