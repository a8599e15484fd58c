"""Running the API: the listening socket, uvicorn inside our task group, and the stop.

The process owns its signals, not uvicorn (acp_memory.signals): on SIGTERM or SIGINT the
server stops taking requests, cancels running turns, ends the events streams, then the session
runner waits up to 15 s for running memory runs (a persist cut mid-way loses its note) before
its pools stop. A second signal during that wait stops the process at once.
"""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import anyio
import uvicorn

from acp_memory.build import build_runner
from acp_memory.config import Config, Paths
from acp_memory.config.models import HttpServerConfig
from acp_memory.httpserver.agent import HttpAgent
from acp_memory.httpserver.app import create_app
from acp_memory.httpserver.security import bind_problem
from acp_memory.llm.registry import ProviderHub
from acp_memory.signals import exit_code, until_signalled
from acp_memory.tasks.reaper import become_subreaper

# How long stopping lets requests in flight finish once their turns are cancelled.
REQUEST_GRACE_SECONDS = 5
BACKLOG = 128  # connections waiting to be accepted


class CannotServe(Exception):
    """The server cannot start; the message is the one line the user reads."""


@dataclass(frozen=True)
class Listen:
    """Where to listen and who may talk: the httpserver section, flags taking precedence."""

    host: str
    port: int
    token: str
    max_body_bytes: int

    @classmethod
    def from_config(
        cls,
        section: HttpServerConfig,
        host: str | None = None,
        port: int | None = None,
        token: str | None = None,
    ) -> Listen:
        return cls(
            host=host or section.host,
            port=section.port if port is None else port,
            token=section.auth_token if token is None else token,
            max_body_bytes=section.max_body_bytes,
        )

    def problem(self) -> str | None:
        """Why the server must not start with these settings, or None."""
        if not 0 <= self.port <= 65535:
            return f"--port {self.port}: a port is 0 to 65535 (0 picks a free one)"
        return bind_problem(self.host, self.token)


@dataclass(frozen=True)
class RunningServer:
    url: str
    port: int
    agent: HttpAgent


class _Uvicorn(uvicorn.Server):
    """uvicorn with its hands off the process's signals: the surface decides when it stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def http_server(
    cfg: Config, paths: Paths, listen: Listen, hub: ProviderHub
) -> AsyncIterator[RunningServer]:
    """Serve the API until the block ends, then stop as a signal would have it.

    CannotServe when the settings forbid it (no token off loopback, a bad port) or the
    bind fails.
    """
    problem = listen.problem()
    if problem is not None:
        raise CannotServe(problem)
    runner = build_runner(cfg, paths, hub)
    agent = HttpAgent(runner)
    app = create_app(
        agent, host=listen.host, token=listen.token, max_body_bytes=listen.max_body_bytes
    )
    server = _Uvicorn(
        uvicorn.Config(
            app,
            lifespan="off",
            log_config=None,
            log_level="warning",
            access_log=False,
            proxy_headers=False,
            http="h11",
            ws="none",
            timeout_graceful_shutdown=REQUEST_GRACE_SECONDS,
        )
    )
    host = f"[{listen.host}]" if ":" in listen.host else listen.host
    sock = _bind(listen.host, listen.port)
    port = sock.getsockname()[1]
    try:
        # The runner's exit is where running memory runs get their bounded wait.
        async with runner.running(), agent.running(), anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            try:
                yield RunningServer(f"http://{host}:{port}", port, agent)
            finally:
                agent.stop()
                server.should_exit = True
    finally:
        agent.close()
        sock.close()


def _bind(host: str, port: int) -> socket.socket:
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        # Made with its protocol (TCP), not 0: asyncio sets TCP_NODELAY on the connections of
        # a TCP socket only, and without it each answer waits ~40 ms on a delayed ACK.
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise CannotServe(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise CannotServe(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def run_http(
    cfg: Config,
    paths: Paths,
    host: str | None = None,
    port: int | None = None,
    token: str | None = None,
) -> int:
    """`acp-memory http`: serve until SIGTERM or SIGINT; the exit code (2 when a setting
    forbids starting, 1 when the address cannot be used, 130 after Ctrl-C)."""
    listen = Listen.from_config(cfg.httpserver, host, port, token)
    problem = listen.problem()
    if problem is not None:
        _say(problem)
        return 2
    failed: str | None = None

    async def serve(stop: anyio.Event) -> None:
        nonlocal failed
        async with ProviderHub(cfg) as hub:
            try:
                async with http_server(cfg, paths, listen, hub) as server:
                    _say(f"listening on {server.url} (Ctrl-C stops)")
                    await stop.wait()
            except CannotServe as exc:
                failed = str(exc)

    async def main() -> int:
        got = await until_signalled(serve)
        if failed is not None:
            _say(failed)
            return 1
        return exit_code(got)

    become_subreaper()  # what its MCP servers leave behind is its own to end and reap
    return anyio.run(main)


def _say(line: str) -> None:
    print(f"acp-memory http: {line}", file=sys.stderr, flush=True)
