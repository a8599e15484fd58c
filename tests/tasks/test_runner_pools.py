"""The session runner's pools: one per session, owned by the runner's task group, stopped
with it (print mode's turn, or the ACP server's drain)."""

from __future__ import annotations

import json

import pytest
from tasks.procs import GRACE_S, Fifo, assert_gone

from acp_memory.build import build_engine
from acp_memory.config import Config, Paths
from acp_memory.hooks.surface import Hooks
from acp_memory.llm.registry import ModelHandle
from acp_memory.runtime.runner import SessionRunner
from acp_memory.sessions.store import SessionStore

pytestmark = pytest.mark.anyio


def runner_for(cfg: Config, paths: Paths) -> SessionRunner:
    def no_model(model_id: str) -> ModelHandle:
        raise AssertionError("no model call in these tests")

    runner = SessionRunner(cfg, paths, build_engine(cfg), no_model, hooks=Hooks(cfg))
    runner.kill_grace_seconds = GRACE_S
    return runner


async def test_the_end_of_the_runners_block_stops_every_task_and_kills_its_group(
    paths: Paths, cfg: Config
):
    session = SessionStore(paths.sessions_dir).create(cwd=str(paths.cwd), model_id="m")
    ready = Fifo(paths.cwd / "ready")
    runner = runner_for(cfg, paths)
    async with runner.running():
        pool = runner.pool_for(session)
        assert runner.pool_for(session) is pool
        assert runner.tool_context(session).tasks is pool
        await pool.start_command(f'sleep 600 & echo "$$ $!" > {ready.path}; wait', paths.cwd)
        leader, child = map(int, (await ready.read_line()).split())
    record = json.loads((session.dir / "background" / "bg_1" / "meta.json").read_text())
    assert (record["status"], record["error"]) == ("stopped", "stopped: the agent stopped")
    await assert_gone(leader, child)
    assert runner.tool_context(session).tasks is None  # no pool outside the block


async def test_closing_a_sessions_pool_leaves_other_sessions_running(paths: Paths, cfg: Config):
    store = SessionStore(paths.sessions_dir)
    one = store.create(cwd=str(paths.cwd), model_id="m")
    two = store.create(cwd=str(paths.cwd), model_id="m")
    go = Fifo(paths.cwd / "go")
    runner = runner_for(cfg, paths)
    async with runner.running():
        pool_one, pool_two = runner.pool_for(one), runner.pool_for(two)
        first = await pool_one.start_command(f"read x < {go.path}", paths.cwd)
        second = await pool_two.start_command(f"read x < {go.path}", paths.cwd)
        runner.close_pool(one.id)
        assert (await pool_one.wait(first, 10)).status == "stopped"
        assert not second.done.is_set()
        assert runner.pool_for(one) is not pool_one  # a closed pool is replaced on next use
        go.send()
        assert (await pool_two.wait(second, 10)).status == "succeeded"
