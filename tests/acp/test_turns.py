"""Turns run concurrently with everything else, and cancel ends them cleanly."""

from __future__ import annotations

import json

import anyio
import pytest
from acp import RequestError, text_block
from gated import GatedProvider, gated_agent, prompt_in_flight
from harness import in_process_agent

pytestmark = pytest.mark.anyio


async def test_cancel_ends_a_running_turn_with_stop_reason_cancelled(cfg, paths):
    provider = GatedProvider()
    async with in_process_agent(cfg, paths, gated_agent(cfg, paths, provider)) as ed:
        sid = await ed.start_session(paths.cwd)
        async with prompt_in_flight(ed, sid, provider) as result:
            await ed.conn.cancel(session_id=sid)
        assert result["resp"].stop_reason == "cancelled"
        assert provider.cancelled.is_set()
    stored = json.loads((paths.sessions_dir / sid / "messages.json").read_text())["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["content"] == "partial "


async def test_cancel_without_a_running_turn_is_harmless(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        await ed.conn.cancel(session_id=sid)
        resp = await ed.conn.prompt(session_id=sid, prompt=[text_block("still fine")])
        assert resp.stop_reason == "end_turn"


async def test_a_second_prompt_in_a_busy_session_is_refused_and_the_first_survives(cfg, paths):
    provider = GatedProvider()
    async with in_process_agent(cfg, paths, gated_agent(cfg, paths, provider)) as ed:
        sid = await ed.start_session(paths.cwd)
        async with prompt_in_flight(ed, sid, provider, "one") as result:
            with pytest.raises(RequestError) as err:
                await ed.conn.prompt(session_id=sid, prompt=[text_block("two")])
            assert "already running" in str(err.value)
            provider.release.set()
        assert result["resp"].stop_reason == "end_turn"
        assert ed.client.text(sid) == "partial done"


async def test_a_long_prompt_does_not_block_other_requests(cfg, paths):
    provider = GatedProvider()
    async with in_process_agent(cfg, paths, gated_agent(cfg, paths, provider)) as ed:
        sid = await ed.start_session(paths.cwd)
        other = (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])).session_id
        async with prompt_in_flight(ed, sid, provider, "slow") as result:
            with anyio.fail_after(5):
                # The first turn is held on its model; these are answered all the same.
                listed = await ed.conn.list_sessions()
                await ed.conn.set_session_mode(session_id=other, mode_id="ask")
            assert "resp" not in result, "the held turn finished before the other requests"
            assert {s.session_id for s in listed.sessions} == {sid, other}
            provider.release.set()


async def test_prompts_in_two_sessions_run_at_the_same_time(cfg, paths):
    provider = GatedProvider()
    async with in_process_agent(cfg, paths, gated_agent(cfg, paths, provider)) as ed:
        a = await ed.start_session(paths.cwd)
        b = (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])).session_id
        async with anyio.create_task_group() as tg:
            for sid in (a, b):
                tg.start_soon(lambda s=sid: ed.conn.prompt(session_id=s, prompt=[text_block("x")]))
            with anyio.fail_after(5):
                await ed.client.wait_for(
                    lambda: ed.client.text(a) == "partial " and ed.client.text(b) == "partial "
                )
            provider.release.set()
        assert ed.client.text(a) == ed.client.text(b) == "partial done"


async def test_the_offline_model_drives_a_tool_through_the_loop(cfg, paths):
    (paths.cwd / "hello.txt").write_text("hi from disk")
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        resp = await ed.conn.prompt(
            session_id=sid, prompt=[text_block('/tool read_file {"path": "hello.txt"}')]
        )
        kinds = ed.client.kinds(sid)
        reply = ed.client.text(sid)
    assert resp.stop_reason == "end_turn"
    assert kinds.index("tool_call") < kinds.index("tool_call_update")
    assert "read_file returned" in reply and "hi from disk" in reply
    stored = json.loads((paths.sessions_dir / sid / "messages.json").read_text())["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
