"""The server lets idle sessions go: completions without a session header (what OpenAI clients
send) keep its descriptors flat, a session let go is loaded again by the next request, one
whose events stream is read or whose background task runs stays, and a bundle another process
took meanwhile answers 409."""

from __future__ import annotations

import os
from typing import Any

import anyio
import pytest
from fakes.clock import FakeClock
from httpkit import events_of, served

from acp_memory.config import Config, Paths
from acp_memory.config.models import SessionsConfig
from acp_memory.sessions.lock import BundleLock

pytestmark = pytest.mark.anyio

SESSION_HEADER = "X-Coddy-Session-Id"


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def chat(text: str) -> dict[str, Any]:
    return {"model": "agent", "messages": [{"role": "user", "content": text}]}


async def test_completions_without_a_session_header_keep_the_descriptors_flat(paths: Paths):
    cfg = Config(sessions=SessionsConfig(max_open=4))
    async with served(cfg, paths) as api:
        for i in range(8):  # past max_open: what the server holds from now on
            assert (await api.client.post("/v1/chat/completions", json=chat(f"{i}"))).is_success
        before = open_descriptors()
        for i in range(200):
            resp = await api.client.post("/v1/chat/completions", json=chat(f"hello {i}"))
            assert resp.status_code == 200, resp.text
        after = open_descriptors()
        assert after <= before + 2, (before, after)  # one more per session without the bound
        assert len(api.server.agent.table.sessions) == 4


async def test_a_session_let_go_when_idle_is_loaded_again_by_the_next_request(paths: Paths):
    async with served(Config(), paths) as api:
        table = api.server.agent.table
        table.clock = clock = FakeClock()
        first = await api.client.post("/v1/chat/completions", json=chat("the door is blue"))
        sid = first.headers[SESSION_HEADER]
        session = table.sessions[sid]
        assert session.lock.held
        clock.advance(table.idle_seconds)
        table.release_idle()
        assert sid not in table.sessions and not session.lock.held
        resp = await api.client.post(
            "/v1/chat/completions", json=chat("and the wall?"), headers={SESSION_HEADER: sid}
        )
        assert resp.status_code == 200, resp.text
        assert table.sessions[sid].lock.held
        messages = (await api.client.get(f"/coddy/sessions/{sid}/messages")).json()["messages"]
    said = [m["content"] for m in messages if m["role"] == "user"]
    assert said == ["the door is blue", "and the wall?"]


async def test_the_servers_timer_lets_an_idle_session_go(paths: Paths):
    async with served(Config(), paths) as api:
        table = api.server.agent.table
        table.clock = clock = FakeClock()
        released = anyio.Event()
        close_pool = table.on_release

        def on_release(session_id: str) -> None:
            close_pool(session_id)
            released.set()

        table.on_release = on_release
        sid = await api.new_session()
        with anyio.fail_after(5):
            await clock.until_pending(1)
        clock.advance(table.idle_seconds)
        with anyio.fail_after(5):
            await released.wait()
        assert sid not in table.sessions


async def test_a_session_stays_while_its_events_stream_is_read_or_a_background_task_runs(
    paths: Paths,
):
    async with served(Config(), paths) as api:
        agent = api.server.agent
        table = agent.table
        table.clock = clock = FakeClock()
        streamed, tasked, subscribed = [await api.new_session() for _ in range(3)]
        # The hub's own reader, closed at a point the test knows (the server notices a client
        # that left its HTTP stream only some time later).
        updates = agent.events.subscribe(subscribed)
        pool = agent.runner.pool_for(table.sessions[tasked])  # as a turn's tools get it
        task = await pool.start_command("sleep 60", paths.cwd)
        async with events_of(api, streamed):
            clock.advance(table.idle_seconds)
            table.release_idle()
            assert set(table.sessions) == {streamed, tasked, subscribed}
        await pool.stop(task.id)
        updates.close()
        clock.advance(table.idle_seconds)  # idle from the last time they were seen in use
        table.release_idle()
        assert tasked not in table.sessions and subscribed not in table.sessions
        assert pool.closed  # its pool went with it


async def test_a_session_let_go_whose_bundle_another_process_took_is_409(paths: Paths):
    cfg = Config(sessions=SessionsConfig(max_open=1))
    async with served(cfg, paths) as api:
        first = await api.client.post("/v1/chat/completions", json=chat("one"))
        sid = first.headers[SESSION_HEADER]
        await api.client.post("/v1/chat/completions", json=chat("two"))  # lets the first go
        other = BundleLock(paths.sessions_dir / sid)
        other.acquire()  # as another process would, now that this server let it go
        try:
            busy = await api.client.post(
                "/v1/chat/completions", json=chat("three"), headers={SESSION_HEADER: sid}
            )
        finally:
            other.release()
        assert busy.status_code == 409
        assert "another acp-memory process" in busy.json()["error"]["message"]
        resp = await api.client.post(
            "/v1/chat/completions", json=chat("four"), headers={SESSION_HEADER: sid}
        )
        assert resp.status_code == 200, resp.text


async def test_reading_the_tasks_of_a_session_this_server_does_not_hold_keeps_no_pool(
    paths: Paths,
):
    async with served(Config(), paths) as api:
        table, runner = api.server.agent.table, api.server.agent.runner
        table.clock = clock = FakeClock()
        first = await api.client.post("/v1/chat/completions", json=chat("the door is blue"))
        sid = first.headers[SESSION_HEADER]
        clock.advance(table.idle_seconds)
        table.release_idle()
        assert sid not in table.sessions and sid not in runner._pools
        for _ in range(3):
            listed = await api.client.get(f"/coddy/sessions/{sid}/background-tasks")
            assert listed.status_code == 200, listed.text
            missing = await api.client.get(f"/coddy/sessions/{sid}/background-tasks/bg_9")
            assert missing.status_code == 404
        assert sid not in runner._pools
