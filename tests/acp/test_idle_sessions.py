"""One connection lets its idle sessions go: many `session/new` keep the descriptors flat, a
session let go answers its next prompt as before (loaded again), the connection's timer lets
an idle session go, and a bundle another process took meanwhile answers -32001."""

from __future__ import annotations

import json
import os

import anyio
import pytest
from acp import RequestError, text_block
from fakes.clock import FakeClock
from harness import in_process_agent

from acp_memory.acp.server import build_agent
from acp_memory.config import Config, Paths
from acp_memory.config.models import SessionsConfig
from acp_memory.llm.registry import ProviderHub
from acp_memory.sessions.lock import BundleLock

pytestmark = pytest.mark.anyio


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_many_sessions_on_one_connection_keep_the_descriptors_flat(paths: Paths):
    cfg = Config(sessions=SessionsConfig(max_open=4))
    async with in_process_agent(cfg, paths) as ed:
        first = await ed.start_session(paths.cwd)
        await ed.conn.prompt(session_id=first, prompt=[text_block("the door is blue")])
        for _ in range(8):  # past max_open: what the agent holds from now on
            await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
        before = open_descriptors()
        for _ in range(300):
            await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
        after = open_descriptors()
        assert after <= before + 2, (before, after)  # one more per session without the bound
        # The first session was let go long ago: its next prompt loads it again.
        resp = await ed.conn.prompt(session_id=first, prompt=[text_block("and the wall?")])
        assert resp.stop_reason == "end_turn"
    stored = json.loads((paths.sessions_dir / first / "messages.json").read_text())["messages"]
    said = [m["content"] for m in stored if m["role"] == "user"]
    assert said == ["the door is blue", "and the wall?"]


async def test_the_connections_timer_lets_an_idle_session_go(paths: Paths):
    cfg = Config()
    agent = build_agent(cfg, paths, ProviderHub(cfg))
    table = agent.table
    table.clock = clock = FakeClock()
    released = anyio.Event()
    close_pool = table.on_release  # what the runner wired: kept, only watched

    def on_release(session_id: str) -> None:
        close_pool(session_id)
        released.set()

    table.on_release = on_release
    async with in_process_agent(cfg, paths, agent) as ed:
        sid = await ed.start_session(paths.cwd)
        assert table.sessions[sid].lock.held
        with anyio.fail_after(5):
            await clock.until_pending(1)
        clock.advance(table.idle_seconds)
        with anyio.fail_after(5):
            await released.wait()
        assert sid not in table.sessions
        resp = await ed.conn.prompt(session_id=sid, prompt=[text_block("still here?")])
        assert resp.stop_reason == "end_turn" and table.sessions[sid].lock.held


async def test_a_prompt_in_a_session_let_go_whose_bundle_another_process_took_is_busy(
    paths: Paths,
):
    cfg = Config(sessions=SessionsConfig(max_open=1))
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])  # lets the first go
        other = BundleLock(paths.sessions_dir / sid)
        other.acquire()  # as another process would, now that this agent let it go
        try:
            with pytest.raises(RequestError) as err:
                await ed.conn.prompt(session_id=sid, prompt=[text_block("hi")])
        finally:
            other.release()
        assert err.value.code == -32001
        assert "another acp-memory process" in str(err.value)
        resp = await ed.conn.prompt(session_id=sid, prompt=[text_block("hi again")])
        assert resp.stop_reason == "end_turn"
