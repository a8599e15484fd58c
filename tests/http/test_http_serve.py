"""Serving and stopping: the listening socket, and what SIGTERM and SIGINT do (running turns
cancelled, events streams ended, running memory runs given their bounded wait)."""

from __future__ import annotations

import asyncio
import json
import socket

import anyio
import pytest
from httpkit import BOUND_S, HeldProvider, events_of, memory_config, served, use_model

from acp_memory.config import Config
from acp_memory.httpserver.serve import _bind

pytestmark = pytest.mark.anyio


async def test_connections_to_the_server_socket_send_without_waiting_for_acks():
    # uvicorn writes an answer's head and body apart: with Nagle on, the body waits for the
    # client's delayed ACK (~40 ms a request). asyncio turns it off for TCP sockets only.
    accepted: list[asyncio.Transport] = []
    arrived = anyio.Event()

    class Keep(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            accepted.append(transport)
            arrived.set()

    listener = _bind("127.0.0.1", 0)
    server = await asyncio.get_running_loop().create_server(Keep, sock=listener)
    async with server, await anyio.connect_tcp("127.0.0.1", listener.getsockname()[1]):
        with anyio.fail_after(BOUND_S):
            await arrived.wait()
        conn = accepted[0].get_extra_info("socket")
        assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        accepted[0].close()


def task_status(paths, sid: str) -> str:  # type: ignore[no-untyped-def]
    meta = paths.sessions_dir / sid / "background" / "bg_1" / "meta.json"
    status: str = json.loads(meta.read_text())["status"]
    return status


async def test_stopping_waits_for_a_running_memory_run_to_finish(paths):
    held = HeldProvider()
    with anyio.fail_after(BOUND_S):
        async with anyio.create_task_group() as tg, served(
            memory_config(wait_seconds=0), paths
        ) as api:
            use_model(api, held, child=True)
            sid = await api.new_session()
            assert (await api.prompt(sid, "remember that tea is green")).status_code == 200
            await held.started.wait()
            draining = api.runner.memory.draining

            async def finish_once_draining() -> None:
                await draining.wait()
                held.release.set()

            tg.start_soon(finish_once_draining)
    # The block's end is the server's stop: the run finished in the wait, not cut by it.
    assert task_status(paths, sid) == "succeeded"


async def test_stopping_gives_up_on_a_memory_run_after_the_wait(paths):
    held = HeldProvider()
    with anyio.fail_after(BOUND_S):
        async with served(memory_config(wait_seconds=0), paths) as api:
            use_model(api, held, child=True)
            api.runner.memory.exit_wait_seconds = 0.1
            sid = await api.new_session()
            assert (await api.prompt(sid, "remember that tea is green")).status_code == 200
            await held.started.wait()
    assert held.cancelled.is_set()
    assert task_status(paths, sid) == "stopped"


async def test_stopping_cancels_running_turns_and_ends_the_events_streams(paths):
    held = HeldProvider()
    async with served(Config(), paths) as api:
        use_model(api, held)
        sid = await api.new_session()
        answer: dict[str, object] = {}

        async def prompt() -> None:
            answer["stop"] = (await api.prompt(sid, "hold on")).json()["stopReason"]

        async with events_of(api, sid) as events, anyio.create_task_group() as tg:
            tg.start_soon(prompt)
            with anyio.fail_after(BOUND_S):
                await held.started.wait()
            api.server.agent.stop()  # what the server's stop does first
            await events.wait_for(lambda: events.ended)
        refused = await api.prompt(sid, "too late")
    assert answer["stop"] == "cancelled" and held.cancelled.is_set()
    assert refused.status_code == 503
    assert "stopping" in refused.json()["error"]["message"]
