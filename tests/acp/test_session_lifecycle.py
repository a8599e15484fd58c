"""Sessions as Zed's history expects them: titled by session_info_update, resumed without a
replay, closed (their memory runs given their bounded wait, then their pool stopped) and
deleted; extra workspace roots (additionalDirectories). Through the official SDK client,
every message schema-checked by the harness."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from acp import RequestError, text_block
from fakes.clock import FakeClock
from gated import Gate, GatedProvider, gated_agent, prompt_in_flight
from harness import Editor, in_process_agent

from acp_memory.acp.agent import AcpAgent
from acp_memory.acp.server import build_agent
from acp_memory.config import Config, Paths
from acp_memory.config.models import MemoryConfig, ModelConfig
from acp_memory.llm.registry import ModelHandle, ProviderHub
from acp_memory.llm.types import ChatRequest, Finished, StreamEvent, TextDelta
from acp_memory.sessions.lock import BundleLock

pytestmark = pytest.mark.anyio

BOUND_S = 10
LONG_LINE = "Refactor the session store so that every bundle write goes through one helper"


class HeldModel(Gate):
    """A memory child's model that answers only once released."""

    name = "held"

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        await self.hold()
        yield TextDelta("nothing worth keeping")
        yield Finished("stop")


def memory_on(**memory: Any) -> Config:
    """The offline model for the turns and, unless held, for the memory runs too."""
    return Config(memory=MemoryConfig(**{"enable": True, **memory}))


def held_runs(cfg: Config, paths: Paths, held: HeldModel) -> AcpAgent:
    """The real agent, its memory runs on `held`; the turn does not wait for them."""
    agent = build_agent(cfg, paths, ProviderHub(cfg))
    agent.runner.child_model_for = lambda model_id: ModelHandle(
        model_id, held, ModelConfig(model=model_id)
    )
    return agent


def info_updates(ed: Editor, sid: str) -> list[Any]:
    kind = "session_info_update"
    return [u for s, u in ed.client.updates if s == sid and u.session_update == kind]


def record(paths: Paths, sid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((paths.sessions_dir / sid / "session.json").read_text())
    return data


def run_meta(paths: Paths, sid: str, task_id: str = "bg_1") -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (paths.sessions_dir / sid / "background" / task_id / "meta.json").read_text()
    )
    return data


@contextlib.asynccontextmanager
async def memory_run_held(
    paths: Paths, clock: FakeClock | None = None
) -> AsyncIterator[tuple[Editor, AcpAgent, HeldModel, str]]:
    """A session whose first turn ended with its memory run still running, held on its model
    (the agent's clock replaced by `clock`, when given, before the session starts)."""
    held = HeldModel()
    cfg = memory_on(wait_seconds=0)
    agent = held_runs(cfg, paths, held)
    async with in_process_agent(cfg, paths, agent) as ed:
        if clock is not None:
            agent.runner.clock = clock
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, "what do I like?") == "end_turn"
        with anyio.fail_after(BOUND_S):
            await held.started.wait()
        yield ed, agent, held, sid


async def request(ed: Editor, method: str, params: dict[str, Any]) -> Any:
    """A request the SDK client has no method for (session/delete), over its connection."""
    with anyio.fail_after(BOUND_S):
        return await ed.conn._conn.send_request(method, params)


async def prompt(ed: Editor, sid: str, text: str) -> str:
    with anyio.fail_after(BOUND_S):
        resp = await ed.conn.prompt(session_id=sid, prompt=[text_block(text)])
    return resp.stop_reason


# -- titles ----------------------------------------------------------------------------------


async def test_the_first_prompt_titles_the_session_as_its_memory_task_is_labelled(paths):
    async with in_process_agent(memory_on(), paths) as ed:
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, f"{LONG_LINE}\nand a second line") == "end_turn"
        first = info_updates(ed, sid)
        assert await prompt(ed, sid, "and now?") == "end_turn"
        second = info_updates(ed, sid)[len(first) :]
        listed = await ed.conn.list_sessions()
    title = LONG_LINE[:60] + "…"
    assert len(LONG_LINE) > 60 and len(first) == 1 and first[0].title == title
    # The same cut, by the same function, as the memory run's task label.
    assert run_meta(paths, sid)["label"] == f"memory: {title}"
    assert first[0].updated_at
    # Every later turn says when it was active, the title unchanged (so left out).
    assert len(second) == 1 and second[0].title is None
    assert second[0].updated_at == record(paths, sid)["updatedAt"] > first[0].updated_at
    [info] = listed.sessions
    assert (info.title, info.updated_at) == (title, second[0].updated_at)


# -- resume ----------------------------------------------------------------------------------


async def test_resume_answers_the_sessions_modes_and_options_without_a_replay(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, "remember kiwi") == "end_turn"
    async with in_process_agent(cfg, paths) as ed:  # a new process
        await ed.conn.initialize(protocol_version=1)
        resp = await ed.conn.resume_session(session_id=sid, cwd=str(paths.cwd))
        replayed = ed.client.kinds(sid)
        assert await prompt(ed, sid, "and then?") == "end_turn"
    assert replayed == []
    assert resp.modes is not None and resp.modes.current_mode_id == "agent"
    assert resp.config_options is not None
    assert {o.id for o in resp.config_options} >= {"mode", "model"}
    stored = json.loads((paths.sessions_dir / sid / "messages.json").read_text())["messages"]
    assert [m["content"] for m in stored if m["role"] == "user"] == ["remember kiwi", "and then?"]


async def test_initialize_advertises_resume_close_delete_and_additional_directories(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        resp = await ed.conn.initialize(protocol_version=1)
    caps = resp.agent_capabilities.session_capabilities
    assert caps is not None
    for name in ("list", "resume", "close", "delete", "additional_directories"):
        assert getattr(caps, name) is not None, name


# -- close -----------------------------------------------------------------------------------


async def test_close_waits_for_the_running_memory_run_then_stops_the_pool(paths):
    async with memory_run_held(paths) as (ed, agent, held, sid):
        answered = anyio.Event()

        async def close() -> None:
            await ed.conn.close_session(session_id=sid)
            answered.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(close)
            with anyio.fail_after(BOUND_S):
                await agent.runner.memory.draining.wait()
            await anyio.wait_all_tasks_blocked()
            assert not answered.is_set()  # the run is waited for before the answer
            held.release.set()
        assert sid not in agent.runner._pools and sid not in agent.table.sessions
        lock = BundleLock(paths.sessions_dir / sid)
        lock.acquire()  # this process let the bundle go
        lock.release()
        # A closed session opens again on demand.
        assert await prompt(ed, sid, "back again") == "end_turn"
    assert not held.cancelled.is_set()
    assert run_meta(paths, sid)["status"] == "succeeded"


async def test_close_stops_a_memory_run_still_running_after_fifteen_seconds(paths):
    clock = FakeClock()
    async with memory_run_held(paths, clock) as (ed, agent, held, sid):
        async with anyio.create_task_group() as tg:

            async def move_time() -> None:
                await agent.runner.memory.draining.wait()
                # The run's 300 s limit and the close's 15 s wait, on the same clock.
                assert await clock.until_pending(2) == [15.0, 300.0]
                clock.advance(15)

            tg.start_soon(move_time)
            with anyio.fail_after(BOUND_S):
                await ed.conn.close_session(session_id=sid)
        assert held.cancelled.is_set()  # stopped before the answer
        assert sid not in agent.runner._pools
    assert run_meta(paths, sid)["status"] == "stopped"


async def test_close_during_a_prompt_cancels_its_turn_and_waits_for_it_to_end(cfg, paths):
    provider = GatedProvider()
    agent = gated_agent(cfg, paths, provider)
    async with in_process_agent(cfg, paths, agent) as ed:
        sid = await ed.start_session(paths.cwd)
        async with prompt_in_flight(ed, sid, provider) as result:
            with anyio.fail_after(BOUND_S):
                assert await ed.conn.close_session(session_id=sid) is not None
            assert sid not in agent.table.sessions and sid not in agent.table.turns
        assert result["resp"].stop_reason == "cancelled"
        assert provider.cancelled.is_set()  # stopped, not waited for


async def test_close_of_an_unknown_session_is_resource_not_found(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as err:
            await ed.conn.close_session(session_id="sess_0123456789abcdef01234567")
    assert err.value.code == -32002


# -- delete ----------------------------------------------------------------------------------


async def test_delete_stops_the_running_memory_run_then_removes_the_bundle(paths):
    async with memory_run_held(paths) as (ed, _, held, sid):
        assert (paths.sessions_dir / sid / "subagents").is_dir()
        assert await request(ed, "session/delete", {"sessionId": sid}) == {}
        assert held.cancelled.is_set()  # stopped before the answer, not after it
        listed = await ed.conn.list_sessions()
        with pytest.raises(RequestError) as err:
            await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
    # Its child sessions and task records went with it; the stopped run wrote none anew.
    assert not (paths.sessions_dir / sid).exists()
    assert listed.sessions == [] and err.value.code == -32002


async def test_a_child_session_refuses_to_be_deleted_on_its_own(paths):
    async with in_process_agent(memory_on(), paths) as ed:
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, "Remember that the kettle is blue.") == "end_turn"
        child = next((paths.sessions_dir / sid / "subagents").iterdir()).name
        with pytest.raises(RequestError) as err:
            await request(ed, "session/delete", {"sessionId": child})
    assert err.value.code == -32602
    assert "child session" in str(err.value) and sid in str(err.value)
    assert (paths.sessions_dir / sid / "subagents" / child).is_dir()


async def test_delete_of_a_session_another_process_writes_is_busy(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)  # this agent holds the bundle's lock
        async with in_process_agent(cfg, paths) as other:
            await other.conn.initialize(protocol_version=1)
            with pytest.raises(RequestError) as err:
                await request(other, "session/delete", {"sessionId": sid})
        assert await prompt(ed, sid, "still here") == "end_turn"
    assert err.value.code == -32001 and "another acp-memory process" in str(err.value)
    assert (paths.sessions_dir / sid / "session.json").is_file()


# -- additionalDirectories -------------------------------------------------------------------


async def test_a_file_tool_writes_in_an_additional_directory_without_asking(paths, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    cfg = Config()
    cfg.tools.permission_mode = "accept_edits"  # writes inside the workspace need no yes
    target = extra / "notes.md"
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        resp = await ed.conn.new_session(
            cwd=str(paths.cwd), mcp_servers=[], additional_directories=[str(extra)]
        )
        sid = resp.session_id
        args = json.dumps({"path": str(target), "content": "from the extra root"})
        assert await prompt(ed, sid, f"/tool write_file {args}") == "end_turn"
        listed = await ed.conn.list_sessions()
    assert ed.client.permission_requests == []
    assert target.read_text() == "from the extra root"
    assert record(paths, sid)["additionalDirectories"] == [str(extra)]
    assert listed.sessions[0].additional_directories == [str(extra)]


async def test_load_and_resume_take_the_whole_list_of_additional_directories(cfg, paths, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        sid = (
            await ed.conn.new_session(
                cwd=str(paths.cwd), mcp_servers=[], additional_directories=[str(one)]
            )
        ).session_id
        await ed.conn.resume_session(
            session_id=sid, cwd=str(paths.cwd), additional_directories=[str(two), str(one)]
        )
        resumed = record(paths, sid)["additionalDirectories"]
        await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
        loaded = record(paths, sid)["additionalDirectories"]
    assert resumed == [str(two), str(one)]
    assert loaded == []  # omitted: no additional roots for the loaded session


async def test_an_additional_directory_given_twice_is_kept_once(cfg, paths, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        roots = [str(one), str(two), str(one)]
        resp = await ed.conn.new_session(
            cwd=str(paths.cwd), mcp_servers=[], additional_directories=roots
        )
    assert record(paths, resp.session_id)["additionalDirectories"] == [str(one), str(two)]


@pytest.mark.parametrize("method", ["new", "load", "resume"])
async def test_an_additional_directory_that_is_not_an_absolute_folder_is_refused_by_name(
    cfg, paths, tmp_path, method
):
    missing = tmp_path / "missing"
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        for bad, why in ((str(missing), f"no such folder: {missing}"), ("rel/dir", "'rel/dir'")):
            roots = [str(paths.cwd), bad]
            with pytest.raises(RequestError) as err:
                if method == "new":
                    await ed.conn.new_session(
                        cwd=str(paths.cwd), mcp_servers=[], additional_directories=roots
                    )
                elif method == "load":
                    await ed.conn.load_session(
                        session_id=sid,
                        cwd=str(paths.cwd),
                        mcp_servers=[],
                        additional_directories=roots,
                    )
                else:
                    await ed.conn.resume_session(
                        session_id=sid, cwd=str(paths.cwd), additional_directories=roots
                    )
            assert err.value.code == -32602
            assert "additionalDirectories" in str(err.value) and why in str(err.value)
    assert record(paths, sid)["additionalDirectories"] == []
    assert [p.name for p in paths.sessions_dir.iterdir()] == [sid]
