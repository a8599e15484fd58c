"""The memory run of a user turn: the memory subagent as a system task of the session's pool,
its report in the turn context, its memory_run updates, its bounds."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from engine.turnkit import fake_config, prompt, turn_agent, turn_context_text
from fakes.httpserver import Recorded
from fakes.openai_server import FakeOpenAI
from fakes.script import Reply, call, error, text, tool_calls
from harness import Editor

from acp_memory.config import Config, Paths
from acp_memory.config.models import AcpConfig, MemoryConfig, ModelConfig
from acp_memory.runtime.subagents import REPORT_HEADER
from acp_memory.sessions import store as store_module
from acp_memory.sessions.transcript import TranscriptFile
from acp_memory.tasks.pool import TaskPool
from acp_memory.tasks.records import TaskRecord
from acp_memory.tools.base import ToolContext, ToolKind, ToolResult

pytestmark = pytest.mark.anyio

REPORT = "Already on disk:\n- The user's favourite fruit is the mango."
SIX = ["memory_delete", "memory_list", "memory_mkdir", "memory_read", "memory_save",
       "memory_search"]


class MemoryRoutedOpenAI(FakeOpenAI):
    """The memory child (the only caller offered memory_search) gets its own script, so the
    parent's keeps its order whatever the order in which the two ask."""

    def __init__(self) -> None:
        super().__init__()
        self.child: list[Reply] = []
        self.child_requests: list[Recorded] = []
        self.parent_requests: list[Recorded] = []

    def _next(self, request: Recorded) -> Reply:
        if "memory_search" in _tools_of(request):
            self.child_requests.append(request)
            return self.child.pop(0) if self.child else error(500, "no child reply left")
        self.parent_requests.append(request)
        return super()._next(request)


class UnstartedRun:
    """A memory run in flight whose task has not started yet."""

    task = None


def _tools_of(request: Recorded) -> list[str]:
    return sorted(t["function"]["name"] for t in (request.json or {}).get("tools", []))


def memory_config(server: FakeOpenAI, **memory: Any) -> Config:
    cfg = fake_config(server.base_url)
    settings: dict[str, Any] = {"enable": True, "wait_seconds": 10}
    settings.update(memory)
    cfg.memory = MemoryConfig(**settings)
    return cfg


def memory_updates(ed: Editor) -> list[dict[str, Any]]:
    """The memory_run payloads the agent sent (the SDK client drops the unknown variant, as
    a v1 client does, so they are read off the wire)."""
    out = []
    for msg in ed.checker.sent:
        params = msg.get("params") or {}
        if msg.get("method") == "session/update" and params["update"].get("sessionUpdate") == (
            "memory_run"
        ):
            out.append(params["update"])
        elif msg.get("method") == "_acp_memory/memory_run":
            out.append(params)
    return out


def task_dirs(paths: Paths, sid: str) -> list[str]:
    folder = paths.sessions_dir / sid / "background"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def meta(paths: Paths, sid: str, task_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (paths.sessions_dir / sid / "background" / task_id / "meta.json").read_text()
    )
    return data


def task_log(paths: Paths, sid: str, task_id: str) -> str:
    return (paths.sessions_dir / sid / "background" / task_id / "output.log").read_text()


async def test_a_turn_runs_the_memory_child_and_its_report_rides_the_first_request(paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [
            tool_calls(call("memory_search", {"query": "fruit", "scope": "both"})),
            text(REPORT),
        ]
        server.script(text("Mango it is."))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "What is my favourite fruit?\nsecond line") == "end_turn"
            updates = memory_updates(ed)
            streamed = [u for s, u in ed.client.updates if s == sid]
        assert len(server.child_requests) == 2 and len(server.parent_requests) == 1
    # Exactly the six memory tools for the child; none of them for the parent.
    assert _tools_of(server.child_requests[0]) == SIX
    parent_tools = _tools_of(server.parent_requests[0])
    assert not set(parent_tools) & set(SIX)
    assert server.child_requests[0].json["max_tokens"] == 256  # min(model's, copilot cap)
    # The report rides after the history, never in the system message.
    first = server.parent_requests[0]
    assert "## Long-term memory" in turn_context_text(first)
    assert REPORT.splitlines()[1] in turn_context_text(first)
    assert REPORT.splitlines()[1] not in first.messages[0]["content"]
    # The run: a system agent task of the parent's pool, its bundle under subagents/.
    (task_id,) = task_dirs(paths, sid)
    record = meta(paths, sid, task_id)
    child_id = record["agent"]["session_id"]
    assert record["system"] is True and record["kind"] == "agent"
    assert record["agent"] == {"name": "memory", "session_id": child_id, "system": True}
    assert record["label"] == "memory: What is my favourite fruit?"
    assert record["status"] == "succeeded"
    child_dir = paths.sessions_dir / sid / "subagents" / child_id
    child = json.loads((child_dir / "session.json").read_text())
    assert child["subagentRun"] is True and child["parentSessionId"] == sid
    assert child["subagentName"] == "memory" and child["subagentTaskId"] == task_id
    assert child["subagentDepth"] == 1
    log = task_log(paths, sid, task_id)
    assert "[tool] Memory Search fruit" in log and REPORT_HEADER in log
    assert log.rstrip("\n").splitlines()[-1] == "report delivered to the turn (first request)"
    # The updates, exactly; no child text or tool call on the parent's stream.
    assert updates == [
        {"sessionUpdate": "memory_run", "status": "started", "taskId": task_id,
         "childSessionId": child_id, "_meta": {"acpMemory": {"kind": "turn"}}},
        {"sessionUpdate": "memory_run", "status": "finished", "taskId": task_id,
         "childSessionId": child_id, "taskStatus": "succeeded",
         "durationMs": updates[1]["durationMs"], "delivered": True,
         "_meta": {"acpMemory": {"modelCalls": 2, "inputTokens": 24, "outputTokens": 14,
                                 "cachedReadTokens": 0, "cachedWriteTokens": 0,
                                 "durationMs": updates[1]["durationMs"], "kind": "turn"}}},
    ]
    assert not [u for u in streamed if u.session_update in ("tool_call", "tool_call_update")]
    said = "".join(u.content.text for u in streamed if u.session_update == "agent_message_chunk")
    assert said == "Mango it is."
    # Nothing of the report reaches the parent's transcript or session.json.
    bundle = paths.sessions_dir / sid
    assert "mango." not in (bundle / "messages.json").read_text()
    assert "mango." not in (bundle / "session.json").read_text()


async def test_a_runs_child_bundle_is_made_titled_and_its_session_json_written_once(
    paths, monkeypatch
):
    written: list[str] = []
    real = store_module.write_json_atomic

    def recording(path: Path, data: Any, **kw: Any) -> None:
        written.append(f"{path.parent.parent.name}/{path.name}")
        real(path, data, **kw)

    monkeypatch.setattr(store_module, "write_json_atomic", recording)
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT)]
        server.script(text("ok"))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "What is my favourite fruit?") == "end_turn"
    child_id = meta(paths, sid, "bg_1")["agent"]["session_id"]
    child = json.loads((paths.sessions_dir / sid / "subagents" / child_id / "session.json")
                       .read_text())
    task = json.loads((paths.sessions_dir / sid / "subagents" / child_id / "messages.json")
                      .read_text())["messages"][0]["content"]
    assert child["title"] == task.splitlines()[0]
    # Once, as the run claimed its task: the task, its first message, rewrites nothing.
    assert written.count("subagents/session.json") == 1


async def test_ask_mode_gives_the_child_search_list_and_read_only(paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)")]
        server.script(text("ok"))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await ed.conn.set_session_mode(session_id=sid, mode_id="ask")
            assert await prompt(ed, sid, "remember that I like tea") == "end_turn"
    assert _tools_of(server.child_requests[0]) == ["memory_list", "memory_read", "memory_search"]
    assert "(no memory hits)" in turn_context_text(server.parent_requests[0])


class SettleMemory:
    """Releases the held memory child and returns once its run has settled: the next step
    is then the first to see the report."""

    name = "settle_memory"
    description = "Let the memory run finish."
    kind: ToolKind = "other"
    read_only = True
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

    def __init__(self, release: anyio.Event) -> None:
        self.release = release

    def title(self, args: Mapping[str, Any]) -> str:
        return "Settle memory"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        self.release.set()
        assert ctx.tasks is not None
        task = ctx.tasks.get("bg_1")
        assert task is not None
        await task.done.wait()
        return ToolResult("settled")


async def test_a_late_report_joins_from_the_next_step(paths):
    release = anyio.Event()
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT).stalled_after(0, release)]
        server.script(tool_calls(call("settle_memory", {})), text("done"))
        cfg = memory_config(server, wait_seconds=0)
        async with turn_agent(cfg, paths, SettleMemory(release)) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "anything?") == "end_turn"
            updates = memory_updates(ed)
    first_req, second_req = server.parent_requests
    assert "## Long-term memory" not in turn_context_text(first_req)
    assert REPORT.splitlines()[1] in turn_context_text(second_req)
    (task_id,) = task_dirs(paths, sid)
    assert task_log(paths, sid, task_id).splitlines()[-1] == (
        "report delivered to the turn (a later step)"
    )
    assert updates[-1]["status"] == "finished" and updates[-1]["delivered"] is True


async def test_a_402_from_every_model_fails_the_run_and_the_turn_still_answers(paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [error(402, "subscription expired")]
        server.script(text("answered anyway"))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
            updates = memory_updates(ed)
    assert "## Long-term memory" not in turn_context_text(server.parent_requests[0])
    (task_id,) = task_dirs(paths, sid)
    reason = "402 Payment Required: subscription expired"
    record = meta(paths, sid, task_id)
    assert record["status"] == "failed" and record["error"] == reason
    finished = updates[-1]
    assert finished["status"] == "finished" and finished["taskStatus"] == "failed"
    assert finished["reason"] == reason and finished["delivered"] is False
    assert task_log(paths, sid, task_id).splitlines()[-1] == (
        f"nothing delivered: the run failed: {reason}"
    )


async def test_the_chain_falls_back_when_the_first_model_fails_before_output(paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [error(402, "subscription expired"), text(REPORT)]
        server.script(text("ok"))
        cfg = memory_config(server, model="fake/cheap")
        cfg.models.append(ModelConfig(model="fake/cheap", max_tokens=128))
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
    cheap, session_model = server.child_requests
    assert cheap.json["model"] == "cheap" and cheap.json["max_tokens"] == 128
    assert session_model.json["model"] != "cheap"
    assert REPORT.splitlines()[1] in turn_context_text(server.parent_requests[0])


async def test_a_runs_cost_is_what_its_providers_reported_on_every_surface(paths):
    """Every answered call of the chain counts, the fallback's included (the failed call
    reports no usage); the record, the log, the finished update, the journal and /memory
    all say the same."""
    async with MemoryRoutedOpenAI() as server:
        server.child = [
            error(402, "subscription expired"),
            tool_calls(call("memory_search", {"query": "fruit"})).costing(1000, 60, cached=800),
            text(REPORT).costing(1200, 35, cached=1000),
        ]
        server.script(text("Mango it is."))
        cfg = memory_config(server, model="fake/cheap")
        cfg.models.append(ModelConfig(model="fake/cheap", max_tokens=128))
        async with turn_agent(cfg, paths) as (ed, agent):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "What is my favourite fruit?") == "end_turn"
            (finished,) = [u for u in memory_updates(ed) if u["status"] == "finished"]
            ed.client.updates.clear()
            assert await prompt(ed, sid, "/memory") == "end_turn"
            shown = "".join(u.content.text for s, u in ed.client.updates
                            if s == sid and u.session_update == "agent_message_chunk")
            # The journal's copy is written as the run is sealed, which may follow the turn.
            task = agent.runner.pool_for(agent.table.sessions[sid]).get("bg_1")
            assert task is not None
            with anyio.fail_after(10):
                await task.done.wait()
            per_day = agent.runner.memory.journal().costs_per_day()
    took = finished["durationMs"]
    assert finished["_meta"] == {"acpMemory": {
        "modelCalls": 2, "inputTokens": 2200, "outputTokens": 95, "cachedReadTokens": 1800,
        "cachedWriteTokens": 0, "durationMs": took, "kind": "turn"}}
    assert meta(paths, sid, "bg_1")["cost"] == {
        "model_calls": 2, "input_tokens": 2200, "output_tokens": 95, "cached_read_tokens": 1800,
        "cached_write_tokens": 0, "duration_ms": took}
    line = f"2 model calls, 2200 tokens in (1800 cached), 95 out, {took / 1000:.1f} s"
    assert task_log(paths, sid, "bg_1").splitlines()[-2:] == [
        f"cost: {line}", "report delivered to the turn (first request)"]
    assert f"Cost: {line}." in shown
    assert [{k: v for k, v in row.items() if k != "day"} for row in per_day] == [{
        "runs": 1, "modelCalls": 2, "inputTokens": 2200, "outputTokens": 95,
        "cachedReadTokens": 1800, "cachedWriteTokens": 0, "durationMs": took}]


async def test_a_run_that_fails_midway_keeps_the_cost_of_the_calls_it_made(paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [
            tool_calls(call("memory_search", {"query": "fruit"})).costing(300, 20, cached=100),
            error(402, "subscription expired"),
        ]
        server.script(text("answered anyway"))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
            finished = memory_updates(ed)[-1]
    record = meta(paths, sid, "bg_1")
    assert record["status"] == "failed" and finished["taskStatus"] == "failed"
    assert record["cost"] == {"model_calls": 1, "input_tokens": 300, "output_tokens": 20,
                              "cached_read_tokens": 100, "cached_write_tokens": 0,
                              "duration_ms": finished["durationMs"]}
    assert finished["_meta"]["acpMemory"]["modelCalls"] == 1


async def test_a_run_past_the_session_bound_is_skipped(paths):
    async with MemoryRoutedOpenAI() as server:
        server.script(text("ok"))
        async with turn_agent(memory_config(server), paths) as (ed, agent):
            # A run of another session, not started yet: the process-wide bound counts it.
            bounds = agent.runner.memory.bounds
            assert bounds.admit("other", UnstartedRun()) is None
            bounds.session_limit = 0
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
            updates = memory_updates(ed)
    assert updates == [
        {"sessionUpdate": "memory_run", "status": "skipped",
         "reason": "memory runs in flight for this session: 0 of 0",
         "_meta": {"acpMemory": {"kind": "turn"}}}
    ]
    assert server.child_requests == [] and task_dirs(paths, sid) == []


async def test_turns_of_two_sessions_starting_together_share_the_process_bound(paths):
    """A run counts from the moment it passes the bounds, not once its task is made: two
    sessions' turns at once against a bound of one start one run."""
    release = anyio.Event()
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)").stalled_after(0, release) for _ in range(2)]
        server.script(text("ok"), text("ok"))
        async with turn_agent(memory_config(server, wait_seconds=0), paths) as (ed, agent):
            agent.runner.memory.bounds.process.total_tokens = 1
            sids = [await ed.start_session(paths.cwd) for _ in range(2)]
            async with anyio.create_task_group() as tg:
                for sid in sids:
                    tg.start_soon(prompt, ed, sid, "hello")
            updates = memory_updates(ed)
            release.set()
    assert sorted(u["status"] for u in updates) == ["skipped", "started"]
    assert sum(len(task_dirs(paths, sid)) for sid in sids) == 1


async def test_keep_runs_removes_the_oldest_finished_runs_with_their_bundles(paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)"), text("(no memory hits)")]
        server.script(text("one"), text("two"))
        async with turn_agent(memory_config(server, keep_runs=1), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "first") == "end_turn"
            first_child = meta(paths, sid, "bg_1")["agent"]["session_id"]
            assert await prompt(ed, sid, "second") == "end_turn"
            with anyio.fail_after(10):
                while "bg_1" in task_dirs(paths, sid):
                    await anyio.wait_all_tasks_blocked()
    assert task_dirs(paths, sid) == ["bg_2"]
    children = [p.name for p in (paths.sessions_dir / sid / "subagents").iterdir()]
    assert first_child not in children and len(children) == 1


async def test_ext_notification_mode_sends_the_extension_method(paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)")]
        server.script(text("ok"))
        cfg = memory_config(server)
        cfg.acp = AcpConfig(memory_run_updates="ext_notification")
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
            methods = [m.get("method") for m in ed.checker.sent]
            updates = memory_updates(ed)
    assert [u["status"] for u in updates] == ["started", "finished"]
    assert all(u["sessionId"] == sid and "sessionUpdate" not in u for u in updates)
    assert "_acp_memory/memory_run" in methods
    assert updates[1]["_meta"]["acpMemory"] == {  # the fake's one answer, its usage
        "modelCalls": 1, "inputTokens": 12, "outputTokens": 7, "cachedReadTokens": 0,
        "cachedWriteTokens": 0, "durationMs": updates[1]["durationMs"], "kind": "turn"}


async def test_a_cancel_during_the_wait_ends_the_wait_not_the_run(paths):
    release = anyio.Event()
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT).stalled_after(0, release)]
        async with turn_agent(memory_config(server, wait_seconds=60), paths) as (ed, agent):
            sid = await ed.start_session(paths.cwd)
            async with anyio.create_task_group() as tg:
                stops: list[str] = []

                async def run_prompt() -> None:
                    stops.append(await prompt(ed, sid, "hello"))

                tg.start_soon(run_prompt)
                with anyio.fail_after(10):
                    await server.wait_for_requests(1)  # the child is held: the turn waits
                await ed.conn.cancel(session_id=sid)
            assert stops == ["cancelled"]
            task = agent.runner.pool_for(agent.table.sessions[sid]).get("bg_1")
            assert task is not None and not task.done.is_set()  # the run goes on
            release.set()
            with anyio.fail_after(10):
                await task.done.wait()
            assert task.record.status == "succeeded"
    assert server.parent_requests == []
    log = task_log(paths, sid, "bg_1")
    assert "stopped waiting; the memory run goes on" in log
    assert log.splitlines()[-1] == "turn ended before the report"


async def test_stopping_waits_for_a_running_memory_run(paths):
    release = anyio.Event()
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT).stalled_after(0, release)]
        server.script(text("ok"))
        async with anyio.create_task_group() as tg:
            async with turn_agent(memory_config(server, wait_seconds=0), paths) as (ed, agent):
                runner = agent.runner
                runner.memory.exit_wait_seconds = 60

                async def release_when_draining() -> None:
                    await runner.memory.draining.wait()
                    release.set()

                tg.start_soon(release_when_draining)
                sid = await ed.start_session(paths.cwd)
                assert await prompt(ed, sid, "hello") == "end_turn"
            # End of input: the agent stopped only after the run finished.
            tg.cancel_scope.cancel()  # a drain that never began must fail, not hang
    assert meta(paths, sid, "bg_1")["status"] == "succeeded"


async def test_no_run_with_memory_off_or_for_a_spawned_child(paths):
    async with MemoryRoutedOpenAI() as server:
        server.script(text("off"))
        cfg = memory_config(server, enable=False)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
            assert memory_updates(ed) == []
        assert task_dirs(paths, sid) == [] and server.child_requests == []

    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)")]
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "Count the files.", "name": "counter"})),
            text("3 files."),  # the spawned child: no memory run of its own
            text("Done."),
        )
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "delegate it") == "end_turn"
            updates = memory_updates(ed)
    assert len(server.child_requests) == 1  # the parent's run only
    assert [u["status"] for u in updates] == ["started", "finished"]
    names = [meta(paths, sid, t)["agent"]["name"] for t in task_dirs(paths, sid)]
    assert sorted(names) == ["counter", "memory"]


async def test_the_offline_model_recalls_a_seeded_note_end_to_end(paths):
    notes = paths.home / "memory"
    notes.mkdir(parents=True)
    (notes / "preferences.md").write_text("# Preferences\nThe user's favourite fruit is mango.\n")
    cfg = Config()
    cfg.memory = MemoryConfig(enable=True, wait_seconds=30)
    async with turn_agent(cfg, paths) as (ed, _):
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, "What is my favourite fruit?") == "end_turn"
        said = "".join(
            u.content.text
            for s, u in ed.client.updates
            if s == sid and u.session_update == "agent_message_chunk"
        )
        updates = memory_updates(ed)
    assert "From memory:" in said and "mango" in said
    assert updates[-1]["status"] == "finished" and updates[-1]["delivered"] is True
    assert task_log(paths, sid, "bg_1").splitlines()[-1] == (
        "report delivered to the turn (first request)"
    )


async def test_a_sessions_indexes_are_opened_once_per_opening_not_per_turn(paths, monkeypatch):
    cfg = Config()  # the offline model
    cfg.memory = MemoryConfig(enable=True, wait_seconds=30)
    cfg.sessions.max_open = 1  # a second session lets the first, idle, go
    async with turn_agent(cfg, paths) as (ed, agent):
        runner = agent.runner
        opened: list[str] = []
        real = runner.memory.open_indexes

        def spy(cwd: str) -> None:
            opened.append(cwd)
            real(cwd)

        monkeypatch.setattr(runner.memory, "open_indexes", spy)
        sid = await ed.start_session(paths.cwd)
        for text_ in ("one", "two", "three"):
            assert await prompt(ed, sid, text_) == "end_turn"
        assert opened == [str(paths.cwd)]
        with anyio.fail_after(30):  # its runs ended: an idle session, free to go
            await runner.memory.drain(sid)
            await runner.memory.settled()
        other = await ed.start_session(paths.cwd)
        assert sid not in agent.table.sessions and other in agent.table.sessions
        assert await prompt(ed, sid, "four") == "end_turn"  # opened again
        assert await prompt(ed, sid, "five") == "end_turn"
    assert opened == [str(paths.cwd)] * 3


async def test_a_run_under_keep_runs_reads_no_task_record(paths, monkeypatch):
    cfg = Config()  # the offline model
    cfg.memory = MemoryConfig(enable=True, wait_seconds=30, keep_runs=3)
    listed: list[str] = []
    real = TaskPool.records

    async def spy(pool: TaskPool, include_system: bool = False) -> list[TaskRecord]:
        listed.append(pool.session_id)
        return await real(pool, include_system)

    monkeypatch.setattr(TaskPool, "records", spy)
    async with turn_agent(cfg, paths) as (ed, agent):
        sid = await ed.start_session(paths.cwd)
        for text_ in ("one", "two", "three"):
            assert await prompt(ed, sid, text_) == "end_turn"
            with anyio.fail_after(30):  # its retention ran
                await agent.runner.memory.drain(sid)
                await agent.runner.memory.settled()
        assert listed == []
        assert await prompt(ed, sid, "four") == "end_turn"  # one past the bound
        with anyio.fail_after(30):
            await agent.runner.memory.drain(sid)
            await agent.runner.memory.settled()
    assert listed == [sid]
    assert task_dirs(paths, sid) == ["bg_2", "bg_3", "bg_4"]


async def test_a_runs_child_writes_the_results_of_one_step_in_one_append(paths, monkeypatch):
    notes = paths.home / "memory"
    notes.mkdir(parents=True)
    for i in range(6):  # several hits: the child reads a few of them in one step
        (notes / f"note-{i}.md").write_text(f"# Note {i}\n\nDeploys happen on day {i}.\n")
    cfg = Config()  # the offline model
    cfg.memory = MemoryConfig(enable=True, wait_seconds=30)
    appends: dict[Path, list[int]] = {}
    real = TranscriptFile.append

    def spy(transcript: TranscriptFile, messages: Any) -> None:
        appends.setdefault(transcript.path.parent, []).append(len(messages))
        real(transcript, messages)

    monkeypatch.setattr(TranscriptFile, "append", spy)
    async with turn_agent(cfg, paths) as (ed, agent):
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, "What do you know about the deploys?") == "end_turn"
        with anyio.fail_after(30):
            await agent.runner.memory.drain(sid)
    (child,) = (paths.sessions_dir / sid / "subagents").iterdir()
    stored = json.loads((child / "messages.json").read_text())["messages"]
    at = next(i for i, m in enumerate(stored) if len(m.get("toolCalls") or []) > 1)
    reads = stored[at]["toolCalls"]  # the step's calls, then their results in order
    assert [m["toolCallId"] for m in stored[at + 1 : at + 1 + len(reads)]] == [
        c["id"] for c in reads
    ]
    # One append per message but the step's results, which come together.
    assert len(appends[child]) == len(stored) - (len(reads) - 1)
    assert appends[child][-1] == len(stored)
    parent = paths.sessions_dir / sid  # synced: each message is written as it comes
    assert len(appends[parent]) == len(json.loads((parent / "messages.json").read_text())[
        "messages"])
