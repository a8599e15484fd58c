"""Assembles the agent: config, engine and ACP handlers over one JSON-RPC connection.

Cold start is imports, so `initialize` is answered from the handshake alone: the agent (the
runner, and with it the engine, the notes and their index, the history, the models and the
tools) is built at the connection's first session request, which is when they are first used.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, TaskGroup, TaskStatus

from acp_memory.acp.handshake import (
    SESSION_METHODS,
    Handlers,
    authenticate,
    initialize,
    memory_run_updates,
    unconfigured_handlers,
)
from acp_memory.config import Config, Paths
from acp_memory.jsonrpc.connection import Connection
from acp_memory.jsonrpc.dispatch import Handler
from acp_memory.signals import cancel_when_set

if TYPE_CHECKING:
    from acp_memory.acp.agent import AcpAgent
    from acp_memory.llm.registry import ProviderHub

log = logging.getLogger(__name__)


def build_agent(
    cfg: Config, paths: Paths, hub: ProviderHub, first_session_id: str | None = None
) -> AcpAgent:
    """The agent with its runner, not yet connected; the first session/new opens or creates
    `first_session_id` when given."""
    from acp_memory.acp.agent import AcpAgent
    from acp_memory.build import build_runner

    return AcpAgent(build_runner(cfg, paths, hub), first_session_id)


class AgentOnDemand:
    """One connection's handlers: the handshake answered at once, every session method
    handed to the agent, which the first of them builds (or the one handed in at the start).

    `running()` owns the agent's background work (its runner and the idle sessions' timer)
    from the moment it is built until the block ends; the memory runs get their bounded wait
    and the sessions are released before it returns."""

    def __init__(
        self,
        cfg: Config,
        paths: Paths,
        first_session_id: str | None = None,
        agent: AcpAgent | None = None,
    ) -> None:
        self.cfg = cfg
        self.paths = paths
        self.peer: Connection | None = None
        self._first_session_id = first_session_id
        self._ready = agent  # built, not yet running: running() starts it
        self._agent: AcpAgent | None = None
        self._client: dict[str, Any] | None = None  # its capabilities, once initialize came
        self._input_closed = False
        self._building = anyio.Lock()
        self._ended = anyio.Event()
        self._group: TaskGroup | None = None

    def handlers(self) -> Handlers:
        """The connection's methods: the handshake here, the session methods the agent's."""
        return {
            "initialize": self.initialize,
            "authenticate": authenticate,
            **{method: self._forward(method) for method in SESSION_METHODS},
        }

    def _forward(self, method: str) -> Handler:
        async def handle(params: dict[str, Any]) -> Any:
            agent = await self.agent()
            return await agent.handlers()[method](params)

        return handle

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        """The handshake's answer; the client's capabilities kept for the agent."""
        if self._agent is not None:
            return await self._agent.initialize(params)
        answer = await initialize(params)
        capabilities = params.get("clientCapabilities") or {}
        # Refused now, as the agent would; the agent takes them once built.
        memory_run_updates(capabilities, self.cfg.acp.memory_run_updates)
        self._client = capabilities
        return answer

    def cancel_all(self) -> None:
        """Cancel every running turn and start no more (the input closed)."""
        self._input_closed = True
        if self._agent is not None:
            self._agent.cancel_all()

    async def agent(self) -> AcpAgent:
        """The agent, built and started on the first call."""
        async with self._building:
            if self._agent is None:
                if self._group is None:
                    raise RuntimeError("AgentOnDemand.agent() outside running()")
                await self._group.start(self._build_and_run)
        assert self._agent is not None
        return self._agent

    @asynccontextmanager
    async def running(self) -> AsyncIterator[AgentOnDemand]:
        """Run the agent handed in at once, one built later from then on, until the block
        ends; the agent's end (its memory runs' wait, its sessions released) comes before."""
        async with anyio.create_task_group() as group:
            self._group = group
            if self._ready is not None:
                await group.start(self._run, self._ready)
            try:
                yield self
            finally:
                self._ended.set()
                self._group = None

    async def _build_and_run(self, *, task_status: TaskStatus[None]) -> None:
        from acp_memory.llm.registry import ProviderHub

        async with ProviderHub(self.cfg) as hub:
            agent = build_agent(self.cfg, self.paths, hub, self._first_session_id)
            await self._run(agent, task_status=task_status)

    async def _run(self, agent: AcpAgent, *, task_status: TaskStatus[None]) -> None:
        agent.peer = self.peer
        async with agent.runner.running(), agent.table.releasing():
            try:
                # In one step with no wait: an initialize from now on goes to the agent, and
                # what an earlier one said is handed to it.
                self._agent = agent
                if self._client is not None:
                    agent.accept_client(self._client)
                if self._input_closed:
                    agent.cancel_all()
                task_status.started()
                await self._ended.wait()
            finally:
                with anyio.CancelScope(shield=True):
                    await agent.runner.memory.drain()
                agent.close()


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
    front = AgentOnDemand(cfg, paths, session_id, agent)
    conn = Connection(receive, send, front.handlers(), on_input_closed=front.cancel_all)
    front.peer = conn
    async with front.running():
        await _serve_until(conn, stop)
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
