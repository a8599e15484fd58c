"""The HTTP API served for real in the test's event loop: uvicorn on a free loopback port,
httpx as the client, every session/update read off the events stream checked against the ACP
schema."""

from __future__ import annotations

import contextlib
import functools
import json
import re
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from anyio.abc import Process
from gated import Gate
from wire_schema import WireChecker

from acp_memory.config import Config, Paths
from acp_memory.config.models import MemoryConfig, ModelConfig
from acp_memory.httpserver.serve import Listen, RunningServer, http_server
from acp_memory.llm.provider import Provider
from acp_memory.llm.registry import ModelHandle, ProviderHub
from acp_memory.llm.types import ChatRequest, Finished, StreamEvent, TextDelta

BOUND_S = 10  # every wait of a test on the server


@functools.cache
def _tls() -> ssl.SSLContext:
    # httpx builds (and loads the CA bundle into) a context per client otherwise: a sixth of
    # a test's time, for loopback HTTP that never uses it.
    return ssl.create_default_context()


@dataclass
class Api:
    server: RunningServer
    client: httpx.AsyncClient
    paths: Paths

    @property
    def runner(self) -> Any:
        return self.server.agent.runner

    async def new_session(self, **body: Any) -> str:
        resp = await self.client.post("/coddy/sessions", json={"cwd": str(self.paths.cwd), **body})
        assert resp.status_code == 200, resp.text
        sid: str = resp.json()["id"]
        return sid

    async def prompt(self, sid: str, text: str) -> httpx.Response:
        return await self.client.post(f"/coddy/sessions/{sid}/prompt", json={"text": text})


def memory_config(**memory: Any) -> Config:
    """The built-in offline model, memory on (the offline model is the memory child too)."""
    return Config(memory=MemoryConfig(**{"enable": True, **memory}))


@contextlib.asynccontextmanager
async def served(
    cfg: Config, paths: Paths, *, token: str = "", host: str = "127.0.0.1",
    max_body_bytes: int = 1024 * 1024,
) -> AsyncIterator[Api]:
    """The API on a free port of `host` until the block ends (a stop as on SIGTERM)."""
    listen = Listen(host=host, port=0, token=token, max_body_bytes=max_body_bytes)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with ProviderHub(cfg) as hub, http_server(cfg, paths, listen, hub) as server:
        url = f"http://127.0.0.1:{server.port}"
        async with httpx.AsyncClient(
            base_url=url, headers=headers, timeout=BOUND_S, verify=_tls()
        ) as client:
            yield Api(server, client, paths)


@dataclass
class EventReader:
    """A session's events stream, read in the background; every update schema-checked."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    checker: WireChecker = field(default_factory=WireChecker)
    changed: anyio.Event = field(default_factory=anyio.Event)
    ended: bool = False

    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def said(self) -> str:
        """The agent's message text so far."""
        return "".join(
            d["content"]["text"] for n, d in self.events if n == "agent_message_chunk"
        )

    def memory_runs(self) -> list[dict[str, Any]]:
        return [data for name, data in self.events if name == "memory_run"]

    async def wait_for(self, predicate: Any) -> None:
        with anyio.fail_after(BOUND_S):
            while not predicate():
                self.changed = anyio.Event()
                await self.changed.wait()

    async def read(self, sid: str, response: httpx.Response) -> None:
        name = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data = json.loads(line.removeprefix("data: "))
                message = {"jsonrpc": "2.0", "method": "session/update",
                           "params": {"sessionId": sid, "update": data}}
                self.checker.saw_agent_line(json.dumps(message).encode())
                self.events.append((name, data))
                self.changed.set()
        self.ended = True
        self.changed.set()


@contextlib.asynccontextmanager
async def events_of(api: Api, sid: str) -> AsyncIterator[EventReader]:
    """The session's events stream from now on (subscribed once the block starts)."""
    reader = EventReader()
    async with (
        api.client.stream("GET", f"/coddy/sessions/{sid}/events") as response,
        anyio.create_task_group() as tg,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        tg.start_soon(reader.read, sid, response)
        yield reader
        tg.cancel_scope.cancel()
    reader.checker.assert_clean()


class HeldProvider(Gate):
    """A model that answers "held" once released; `started` says a call reached it."""

    name = "held"

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        await self.hold()
        yield TextDelta("held")
        yield Finished("stop")


def use_model(api: Api, provider: Provider, *, child: bool = False) -> None:
    """Every model of the main turns (or, with child, of the memory runs) is `provider`."""

    def model_for(model_id: str) -> ModelHandle:
        return ModelHandle(model_id, provider, ModelConfig(model=model_id))

    if child:
        api.runner.child_model_for = model_for
    else:
        api.runner.model_for = model_for


@dataclass
class ServerProcess:
    """A real `acp-memory http` process and what it wrote on stderr so far."""

    proc: Process
    stderr: str = ""
    url: str = ""
    closed: bool = False  # its stderr ended
    _changed: anyio.Event = field(default_factory=anyio.Event)

    async def read_stderr(self) -> None:
        assert self.proc.stderr is not None
        async for chunk in self.proc.stderr:
            self.stderr += chunk.decode(errors="replace")
            self._changed.set()
            self._changed = anyio.Event()
        self.closed = True
        self._changed.set()

    async def wait_for(self, pattern: str) -> re.Match[str]:
        """The first match of pattern in its stderr, once it is there."""
        while not (match := re.search(pattern, self.stderr)):
            assert not self.closed, f"the server's stderr ended without {pattern!r}: {self.stderr}"
            await self._changed.wait()
        return match


@contextlib.asynccontextmanager
async def http_process(home: Path, project: Path) -> AsyncIterator[ServerProcess]:
    """`python -m acp_memory http --port 0` as a real process, once it listens; killed on the
    way out if it is still running."""
    proc = await anyio.open_process(
        [sys.executable, "-m", "acp_memory", "http", "--home", str(home),
         "--cwd", str(project), "--port", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    server = ServerProcess(proc)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.read_stderr)
            with anyio.fail_after(60):  # a cold start on a busy machine
                server.url = (await server.wait_for(r"listening on (http://\S+)")).group(1)
            yield server
            tg.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
