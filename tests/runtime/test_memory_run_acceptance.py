"""Issue 9's acceptance, end to end through the ACP client: the memory child and the parent
scripted apart on one fake model server (MemoryRoutedOpenAI), everything read off the wire,
the requests the server got and the bundles on disk."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest
from engine.turnkit import (
    assert_prefix_stable,
    prompt,
    turn_agent,
    turn_context_text,
    updates_of,
)
from fakes.script import Reply, call, error, text, tool_calls
from harness import Editor
from runtime.test_memory_run import (
    REPORT,
    MemoryRoutedOpenAI,
    SettleMemory,
    memory_config,
    memory_updates,
    meta,
    task_dirs,
    task_log,
)

from acp_memory.cli import main
from acp_memory.config import Config, Paths
from acp_memory.config.models import AcpConfig, MemoryConfig, ModelConfig
from acp_memory.runtime.memory_agent import OPERATOR_HEADING
from acp_memory.runtime.subagents import REPORT_HEADER
from acp_memory.tasks.task import Task

pytestmark = pytest.mark.anyio

MEMORY_LOGGER = "acp_memory.runtime.memory_run"


def child_messages(paths: Paths, sid: str, task_id: str = "bg_1") -> list[dict[str, Any]]:
    """messages.json of the memory child that ran as task_id of session sid."""
    child_id = meta(paths, sid, task_id)["agent"]["session_id"]
    bundle = paths.sessions_dir / sid / "subagents" / child_id / "messages.json"
    data: dict[str, Any] = json.loads(bundle.read_text())
    return list(data["messages"])


def session_memory_updates(ed: Editor, sid: str) -> list[dict[str, Any]]:
    """The memory_run updates sent for one session, in order."""
    return [
        m["params"]["update"]
        for m in ed.checker.sent
        if m.get("method") == "session/update"
        and m["params"]["sessionId"] == sid
        and m["params"]["update"].get("sessionUpdate") == "memory_run"
    ]


def last_line(paths: Paths, sid: str, task_id: str = "bg_1") -> str:
    return task_log(paths, sid, task_id).rstrip("\n").splitlines()[-1]


# -- persist -------------------------------------------------------------------------------


async def test_a_persist_shows_in_the_childs_transcript_and_the_task_log_and_lands_on_disk(paths):
    save = {"title": "Tea", "body": "The user drinks green tea.", "scope": "global",
            "relative_path": "preferences/tea.md"}
    async with MemoryRoutedOpenAI() as server:
        server.child = [
            tool_calls(call("memory_search", {"query": "tea"})),
            tool_calls(call("memory_mkdir", {"path": "global:preferences"})),
            tool_calls(call("memory_save", save)),
            text("Saved:\n- The user drinks green tea."),
        ]
        server.script(text("Noted."))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "Remember that I drink green tea.") == "end_turn"
    note = paths.home / "memory" / "preferences" / "tea.md"
    assert note.read_text(encoding="utf-8") == "The user drinks green tea."
    # The child's transcript: the save it asked for, and the result it read.
    messages = child_messages(paths, sid)
    asked = [c for m in messages for c in m.get("toolCalls") or [] if c["name"] == "memory_save"]
    assert len(asked) == 1 and json.loads(asked[0]["arguments"]) == save
    (result,) = [m for m in messages if m["role"] == "tool" and m["name"] == "memory_save"]
    assert result["toolCallId"] == asked[0]["id"] and not result.get("isError")
    assert "global:preferences/tea.md" in result["content"]
    assert (messages[-1]["role"], messages[-1]["content"]) == (
        "assistant", "Saved:\n- The user drinks green tea."
    )
    # The task log: the calls in order, the report block, the delivery line last.
    log = task_log(paths, sid, "bg_1")
    mkdir_at, save_at = log.index("[tool] Memory Mkdir"), log.index("[tool] Memory Save")
    report_at = log.index(f"{REPORT_HEADER}\nSaved:\n- The user drinks green tea.")
    assert mkdir_at < save_at < report_at
    saved = "[tool] completed: saved new note global:preferences/tea.md (26 bytes)."
    assert save_at < log.index(saved) < report_at
    assert last_line(paths, sid) == "report delivered to the turn (first request)"
    # The parent's model read the report of the save in its turn context.
    assert "The user drinks green tea." in turn_context_text(server.parent_requests[0])


async def test_a_600_character_cyrillic_note_saved_by_the_child_is_kept_whole(paths):
    sentence = "Пользователь предпочитает зелёный чай, пишет на Rust и живёт в Казани.\n"
    body = (sentence * 10)[:600]
    assert len(body) == 600
    # Raw UTF-8 in the arguments (no \u escapes), streamed in pieces that split words.
    args = json.dumps({"title": "Привычки", "body": body, "scope": "global",
                       "relative_path": "привычки.md"}, ensure_ascii=False)
    async with MemoryRoutedOpenAI() as server:
        server.child = [tool_calls(call("memory_save", args, chunks=9)), text("Сохранено.")]
        server.script(text("ok"))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "Запомни мои привычки.") == "end_turn"
    note = paths.home / "memory" / "привычки.md"
    assert note.read_bytes() == body.encode("utf-8")
    (asked,) = [c for m in child_messages(paths, sid) for c in m.get("toolCalls") or []]
    assert json.loads(asked["arguments"])["body"] == body


# -- the parent's stream -------------------------------------------------------------------


async def test_no_child_text_or_tool_call_ever_reaches_the_parents_stream(paths):
    narration = "Let me look through the notes first."
    async with MemoryRoutedOpenAI() as server:
        server.child = [
            tool_calls(
                call("memory_search", {"query": "fruit"}),
                call("memory_list", {}),
                call("memory_read", {"path": "global:fruit.md"}),
                text=narration,
                reasoning="Thinking about fruit.",
            ),
            text("Already on disk:\n- CHILD-ONLY-FACT", chunks=4, reasoning="Done thinking."),
        ]
        server.script(text("The parent's own answer.", chunks=3))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "What fruit do I like?") == "end_turn"
            sent = list(ed.checker.sent)
            streamed = ed.client.kinds(sid)
            said = ed.client.text(sid)
    child_id = meta(paths, sid, "bg_1")["agent"]["session_id"]
    assert len(server.child_requests) == 2  # the child did stream text and call three tools
    assert said == "The parent's own answer."
    # The parent's text, and the session's own title update; nothing of the child.
    assert set(streamed) == {"agent_message_chunk", "session_info_update"}
    for msg in sent:
        wire = json.dumps(msg, ensure_ascii=False)
        for secret in (narration, "CHILD-ONLY-FACT", "Thinking about fruit", "memory_search",
                       "memory_read", "Done thinking"):
            assert secret not in wire
        if msg.get("method") == "session/update":
            assert msg["params"]["sessionId"] == sid  # never the child's session
            update = msg["params"]["update"]
            if child_id in wire:
                assert update["sessionUpdate"] == "memory_run"
    # The log has all of it: that is where the child's work goes.
    log = task_log(paths, sid, "bg_1")
    assert narration in log and "CHILD-ONLY-FACT" in log


# -- the fallback chain --------------------------------------------------------------------


async def test_no_fallback_after_output_the_run_fails_with_the_providers_reason(paths):
    partial = "Already on disk: the user"
    async with MemoryRoutedOpenAI() as server:
        server.child = [
            text(partial, chunks=3).then_error(500, "upstream overloaded"),
            text(REPORT),  # what a fallback (or a retry) would stream: never asked for
        ]
        server.script(text("answered without memory"))
        cfg = memory_config(server, model="fake/cheap", copilot_max_tokens=100)
        cfg.models.append(ModelConfig(model="fake/cheap", max_tokens=128))
        cfg.agent.llm_retry_max = 2  # the ordinary retry policy: never after output
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
            updates = memory_updates(ed)
            said = ed.client.text(sid)
    (only,) = server.child_requests
    assert only.json["model"] == "cheap"
    assert only.json["max_tokens"] == 100  # copilot_max_tokens, under the model's 128
    record = meta(paths, sid, "bg_1")
    assert record["status"] == "failed"
    reason = "500 Internal Server Error: upstream overloaded"  # as the seed words a 402's
    assert record["error"] == reason
    finished = updates[-1]
    assert finished["taskStatus"] == "failed" and finished["reason"] == reason
    assert finished["delivered"] is False
    log = task_log(paths, sid, "bg_1")
    assert log.count(partial) == 1  # streamed once, into the log only
    assert last_line(paths, sid) == f"nothing delivered: the run failed: {reason}"
    assert partial not in said and said == "answered without memory"
    assert "## Long-term memory" not in turn_context_text(server.parent_requests[0])


# -- the pool tools ------------------------------------------------------------------------


async def test_the_parents_pool_tools_refuse_the_memory_task_and_the_list_omits_it(paths):
    release = anyio.Event()
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT).stalled_after(0, release)]
        server.script(
            tool_calls(
                call("background_output", {"task_id": "bg_1"}),
                call("background_wait", {"task_id": "bg_1", "timeout_seconds": 0}),
                call("background_stop", {"task_id": "bg_1"}),
                call("background_list", {}),
            ),
            text("done"),
        )
        async with turn_agent(memory_config(server, wait_seconds=0), paths) as (ed, agent):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "what is running?") == "end_turn"
            finished = {u.tool_call_id: u.status for u in updates_of(ed, sid, "tool_call_update")}
            task = agent.runner.pool_for(agent.table.sessions[sid]).get("bg_1")
            assert task is not None and not task.done.is_set()  # the stop did not stop it
            release.set()
            with anyio.fail_after(10):
                await task.done.wait()
    history = server.parent_requests[1].messages
    names = {c["id"]: c["function"]["name"] for m in history for c in m.get("tool_calls") or []}
    results = {names[m["tool_call_id"]]: m for m in history if m["role"] == "tool"}
    for name in ("background_output", "background_wait", "background_stop"):
        assert "bg_1 is a system task" in results[name]["content"], results[name]["content"]
        assert finished[results[name]["tool_call_id"]] == "failed"
    assert results["background_list"]["content"] == "No background tasks in this session."
    assert meta(paths, sid, "bg_1")["status"] == "succeeded"


# -- the prompt cache ----------------------------------------------------------------------


async def test_the_system_message_and_the_prefix_stay_byte_identical_across_different_recalls(
    paths,
):
    recalls = ["Already on disk:\n- The user likes tea.", "Already on disk:\n- The user is Ann."]
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(recalls[0]), text(recalls[1])]
        server.script(
            tool_calls(call("background_list", {})), text("one"),
            tool_calls(call("background_list", {})), text("two"),
        )
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "first") == "end_turn"
            assert await prompt(ed, sid, "second") == "end_turn"
    requests = server.parent_requests
    assert len(requests) == 4
    first_turn, second_turn = requests[:2], requests[2:]
    for r in first_turn:
        assert recalls[0] in turn_context_text(r) and recalls[1] not in turn_context_text(r)
    for r in second_turn:
        assert recalls[1] in turn_context_text(r) and recalls[0] not in turn_context_text(r)
    systems = {json.dumps(r.messages[0], ensure_ascii=False) for r in requests}
    assert len(systems) == 1
    tools = {json.dumps(r.json["tools"]) for r in requests}
    assert len(tools) == 1
    assert_prefix_stable(requests)  # across the steps of a turn and across the two turns


async def test_no_report_is_inherited_from_a_previous_turn(paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [
            text(REPORT),
            error(402, "subscription expired"),  # turn 2: the run fails
            text(""),  # turn 3: the run ends with no final message
        ]
        server.script(text("one"), tool_calls(call("background_list", {})), text("two"),
                      text("three"))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            for message in ("first", "second", "third"):
                assert await prompt(ed, sid, message) == "end_turn"
            updates = memory_updates(ed)
    first, *later = server.parent_requests
    assert "## Long-term memory" in turn_context_text(first)
    assert len(later) == 3
    for request in later:
        assert "## Long-term memory" not in turn_context_text(request)
    assert [u["delivered"] for u in updates if u["status"] == "finished"] == [True, False, False]


# -- the bounds with real runs -------------------------------------------------------------


async def test_the_process_and_session_bounds_skip_runs_with_real_runs_in_flight(paths, caplog):
    release = anyio.Event()
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)").stalled_after(0, release) for _ in range(16)]
        server.script(*[text("ok") for _ in range(18)])
        async with turn_agent(memory_config(server, wait_seconds=0), paths) as (ed, agent):
            runner = agent.runner
            await ed.conn.initialize(protocol_version=1)
            sids = [(await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])).session_id
                    for _ in range(9)]
            for sid in sids[:8]:
                for message in ("one", "two"):
                    assert await prompt(ed, sid, message) == "end_turn"
            with anyio.fail_after(10):
                await server.wait_for_requests(16 + 16)  # every child is asking, held
            assert runner.memory.bounds.in_flight() == 16
            assert [runner.memory.bounds.in_flight(sid) for sid in sids] == [2] * 8 + [0]
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger=MEMORY_LOGGER):
                assert await prompt(ed, sids[8], "seventeenth") == "end_turn"
                assert await prompt(ed, sids[0], "third") == "end_turn"
            warnings = [r.getMessage() for r in caplog.records if r.name == MEMORY_LOGGER]
            process_skip = session_memory_updates(ed, sids[8])
            session_skip = session_memory_updates(ed, sids[0])[-1]
            tasks = [runner.pool_for(agent.table.sessions[s]).get(t) for s in sids[:8]
                     for t in ("bg_1", "bg_2")]
            release.set()
            with anyio.fail_after(10):
                for task in tasks:
                    assert task is not None
                    await task.done.wait()
    process_reason = "memory runs in flight for this process: 16 of 16"
    session_reason = "memory runs in flight for this session: 2 of 2"
    assert process_skip == [
        {"sessionUpdate": "memory_run", "status": "skipped", "reason": process_reason,
         "_meta": {"acpMemory": {"kind": "turn"}}}
    ]
    assert session_skip == {"sessionUpdate": "memory_run", "status": "skipped",
                            "reason": session_reason, "_meta": {"acpMemory": {"kind": "turn"}}}
    assert len(warnings) == 2
    assert process_reason in warnings[0] and session_reason in warnings[1]
    # No task, no child bundle for a skipped run; the others all ran.
    assert task_dirs(paths, sids[8]) == [] and task_dirs(paths, sids[0]) == ["bg_1", "bg_2"]
    assert not (paths.sessions_dir / sids[8] / "subagents").exists()
    assert len(server.child_requests) == 16
    assert all(t is not None and t.record.status == "succeeded" for t in tasks)



async def test_a_run_that_ended_gives_its_bound_back_before_its_records_reach_the_disk(
    paths, monkeypatch
):
    # A run's outcome is known before its final record is written; a slow disk (a loaded
    # machine) must not have quick turns find the session's bound of two full.
    disk = anyio.Event()
    write_record = Task.write_record

    async def slow_final_record(task: Task, *, raise_errors: bool = False,
                                final: bool = False) -> None:
        if final:
            await disk.wait()
        await write_record(task, raise_errors=raise_errors, final=final)

    monkeypatch.setattr(Task, "write_record", slow_final_record)
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)") for _ in range(3)]
        server.script(text("one"), text("two"), text("three"))
        async with turn_agent(memory_config(server), paths) as (ed, agent):
            sid = await ed.start_session(paths.cwd)
            try:
                for message in ("first", "second", "third"):
                    assert await prompt(ed, sid, message) == "end_turn"
                pool = agent.runner.pool_for(agent.table.sessions[sid])
                tasks = [pool.get(t) for t in ("bg_1", "bg_2", "bg_3")]
                assert all(t is not None and not t.done.is_set() for t in tasks)
                assert agent.runner.memory.bounds.in_flight(sid) == 0
            finally:
                disk.set()
            with anyio.fail_after(10):
                for task in tasks:
                    assert task is not None
                    await task.done.wait()
            updates = memory_updates(ed)
    assert [u["status"] for u in updates] == ["started", "finished"] * 3

# -- operator instructions -----------------------------------------------------------------


async def test_operator_instructions_reach_the_child_only_between_its_role_and_its_tools(paths):
    extra = "Write every note in Esperanto."
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)")]
        server.script(tool_calls(call("background_list", {})), text("ok"))
        async with turn_agent(memory_config(server, additional_prompt=extra), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
    system = server.child_requests[0].messages[0]["content"]
    role = system.index("You are the memory subagent of acp-memory.")
    operator = system.index(f"{OPERATOR_HEADING}\n{extra}")
    tools = system.index("## Tools\n")
    assert role < operator < tools and system.count(OPERATOR_HEADING) == 1
    assert all(r.messages[0]["content"] != system for r in server.parent_requests)
    for request in server.parent_requests:
        assert "Esperanto" not in json.dumps(request.json, ensure_ascii=False)
        assert OPERATOR_HEADING not in json.dumps(request.json, ensure_ascii=False)
    for name in ("session.json", "messages.json"):
        assert "Esperanto" not in (paths.sessions_dir / sid / name).read_text()


async def test_operator_instructions_past_their_cap_are_cut_logged_and_reported_by_doctor(
    paths, caplog, capsys
):
    extra = "Keep notes short. " + "Use Esperanto. " * 40
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)")]
        server.script(text("ok"))
        cfg = memory_config(server, additional_prompt=extra, additional_prompt_max_chars=17)
        with caplog.at_level(logging.WARNING):
            async with turn_agent(cfg, paths) as (ed, _):
                sid = await ed.start_session(paths.cwd)
                assert await prompt(ed, sid, "hello") == "end_turn"
    system = server.child_requests[0].messages[0]["content"]
    section = system[system.index(OPERATOR_HEADING):system.index("## Tools\n")]
    assert section.strip() == f"{OPERATOR_HEADING}\nKeep notes short."
    assert "Esperanto" not in system
    cuts = [r for r in caplog.records if "additional_prompt_max_chars" in r.getMessage()]
    assert len(cuts) == 1 and cuts[0].levelno == logging.WARNING
    # doctor names the cut; under the cap (surrounding blanks aside, as a launch reads it) not.
    paths.home.mkdir(parents=True, exist_ok=True)
    finding = "warning: memory.additional_prompt"
    for prompt_text, cut in ((extra, True), ("  Keep notes short.  \n", False)):
        paths.config_file.write_text(json.dumps({"memory": {
            "additional_prompt": prompt_text, "additional_prompt_max_chars": 17}}))
        capsys.readouterr()
        assert main(["doctor", "--home", str(paths.home)]) == 0
        lines = capsys.readouterr().out.splitlines()
        found = [line for line in lines if line.startswith(finding)]
        assert len(found) == (1 if cut else 0), lines
        if cut:
            assert "additional_prompt_max_chars (17)" in found[0] and "cut" in found[0]


# -- the delivery line and the updates -----------------------------------------------------


async def test_a_child_without_a_final_message_delivers_nothing(paths):
    """Narration beside tool calls is not a report: a child that ends on an empty answer, or
    runs out of rounds, produced no final message."""
    async with MemoryRoutedOpenAI() as server:
        server.child = [
            tool_calls(call("memory_search", {"query": "x"}), text="Let me look."),
            text(""),  # turn 1: an empty final answer
            tool_calls(call("memory_search", {"query": "y"}), text="Looking again."),
            tool_calls(call("memory_list", {}), text="Still looking."),  # turn 2: out of rounds
        ]
        server.script(text("one"), text("two"))
        cfg = memory_config(server, recall_max_turns=2, persist_max_turns=1)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "first") == "end_turn"
            assert await prompt(ed, sid, "second") == "end_turn"
            updates = memory_updates(ed)
    assert len(server.child_requests) == 4
    for request in server.parent_requests:
        assert "## Long-term memory" not in turn_context_text(request)
    for task_id in ("bg_1", "bg_2"):
        assert meta(paths, sid, task_id)["status"] == "succeeded"
        assert last_line(paths, sid, task_id) == (
            "nothing delivered: the run produced no final message"
        )
    finished = [u for u in updates if u["status"] == "finished"]
    assert [(u["taskStatus"], u["delivered"]) for u in finished] == [("succeeded", False)] * 2


async def test_a_run_settling_after_the_turn_sends_nothing_more_and_logs_it(paths):
    release = anyio.Event()
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT).stalled_after(0, release)]
        server.script(text("answered first"))
        async with turn_agent(memory_config(server, wait_seconds=0), paths) as (ed, agent):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
            task = agent.runner.pool_for(agent.table.sessions[sid]).get("bg_1")
            assert task is not None
            release.set()
            with anyio.fail_after(10):
                await task.done.wait()
                while not task_log(paths, sid, "bg_1").endswith("report\n"):
                    await anyio.wait_all_tasks_blocked()
            updates = memory_updates(ed)
    assert [u["status"] for u in updates] == ["started"]  # the turn's stream is gone
    assert last_line(paths, sid) == "turn ended before the report"
    assert meta(paths, sid, "bg_1")["status"] == "succeeded"


async def test_finished_goes_out_before_the_prompts_answer_at_delivery_and_at_the_turns_end(
    paths,
):
    first_release, second_release = anyio.Event(), anyio.Event()
    parent_asked, parent_go = anyio.Event(), anyio.Event()
    # A slow client: each finished update is held until the agent has nothing else to do,
    # so only a turn that waits for it sends it before its answer.
    gates = [anyio.Event(), anyio.Event()]

    def held_parent(_: object) -> Reply:
        parent_asked.set()
        return text("late answer").stalled_after(0, parent_go)

    async with MemoryRoutedOpenAI() as server:
        server.child = [
            text(REPORT).stalled_after(0, first_release),
            text(REPORT).stalled_after(0, second_release),
        ]
        # Turn 1 delivers on its second step; turn 2's run settles while the parent's model
        # is answering its last step, so its finished goes out at the turn's end.
        server.script(tool_calls(call("settle_memory", {})), text("delivered"), held_parent)
        cfg = memory_config(server, wait_seconds=0)
        async with turn_agent(cfg, paths, SettleMemory(first_release)) as (ed, agent):
            send = agent._memory_run

            async def slow_send(session_id: str, update: dict[str, Any]) -> None:
                if update["status"] == "finished":
                    await gates[sum(g.is_set() for g in gates)].wait()
                await send(session_id, update)

            agent._memory_run = slow_send  # type: ignore[method-assign]
            sid = await ed.start_session(paths.cwd)

            async def open_gates() -> None:
                with anyio.fail_after(10):
                    await server.wait_for_requests(3)  # turn 1: its child, its two steps
                    await anyio.wait_all_tasks_blocked()
                    gates[0].set()
                    await parent_asked.wait()
                    second_release.set()
                    task = agent.runner.pool_for(agent.table.sessions[sid]).get("bg_2")
                    assert task is not None
                    await task.done.wait()
                    parent_go.set()
                    await anyio.wait_all_tasks_blocked()
                    gates[1].set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(open_gates)
                assert await prompt(ed, sid, "one") == "end_turn"
                assert await prompt(ed, sid, "two") == "end_turn"
            sent = list(ed.checker.sent)
    answers = [i for i, m in enumerate(sent) if "stopReason" in (m.get("result") or {})]
    finished = [
        (i, m["params"]["update"]) for i, m in enumerate(sent)
        if m.get("method") == "session/update"
        and m["params"]["update"].get("status") == "finished"
    ]
    assert len(answers) == 2 and len(finished) == 2
    for (at, _), answer in zip(finished, answers, strict=True):
        assert at < answer
    assert [(u["taskId"], u["delivered"]) for _, u in finished] == [
        ("bg_1", True), ("bg_2", False)
    ]
    assert last_line(paths, sid, "bg_1") == "report delivered to the turn (a later step)"
    assert last_line(paths, sid, "bg_2") == "turn ended before the report"


async def test_updates_off_sends_nothing_while_the_run_still_delivers(paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT)]
        server.script(text("ok"))
        cfg = memory_config(server)
        cfg.acp = AcpConfig(memory_run_updates="off")
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
            assert memory_updates(ed) == []
    assert REPORT in turn_context_text(server.parent_requests[0])
    assert last_line(paths, sid) == "report delivered to the turn (first request)"


async def test_a_run_whose_child_bundle_cannot_be_made_fails_and_the_turn_answers(paths):
    async with MemoryRoutedOpenAI() as server:
        server.script(text("still answered"))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            # The child bundle's folder cannot be made: a file is in its way.
            (paths.sessions_dir / sid / "subagents").write_text("in the way")
            assert await prompt(ed, sid, "hello") == "end_turn"
            updates = memory_updates(ed)
            assert ed.client.text(sid) == "still answered"
    assert [u["status"] for u in updates] == ["started", "finished"]
    finished = updates[-1]
    assert finished["taskStatus"] == "failed" and finished["delivered"] is False
    assert finished["reason"].startswith("cannot create the child session: ")
    # One line naming the folder, never an exception's repr.
    assert "subagents" in finished["reason"] and "[Errno" not in finished["reason"]
    assert meta(paths, sid, "bg_1")["status"] == "failed" and server.child_requests == []


async def test_a_run_whose_files_a_crash_left_empty_reads_as_orphaned_and_everything_lists(
    paths,
):
    """A memory run's files before its final record skip the syncs: after a power cut its
    record, log and child bundle may be found empty. The run reads as orphaned, and
    session/list, /memory, the Tasks drawer's list and the child's bundle all still work."""
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT)]
        server.script(text("ok"), text("ok again"))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
        child_id = meta(paths, sid, "bg_1")["agent"]["session_id"]
        child = paths.sessions_dir / sid / "subagents" / child_id
        run = paths.sessions_dir / sid / "background" / "bg_1"
        for file in (run / "meta.json", run / "output.log", child / "session.json",
                     child / "messages.json"):
            file.write_bytes(b"")  # as a power cut leaves a file whose data never reached disk
        async with turn_agent(memory_config(server, enable=False), paths) as (ed, agent):
            listed = await ed.conn.list_sessions()
            await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
            session = agent.table.sessions[sid]
            drawer = await agent.runner.pool_for(session).records(include_system=True)
            assert await prompt(ed, sid, "/memory") == "end_turn"
            shown = ed.client.text(sid)
            loaded = agent.runner.store.load(child_id)
    assert [s.session_id for s in listed.sessions] == [sid]
    assert [(r.id, r.status, r.system) for r in drawer] == [("bg_1", "orphaned", True)]
    assert "Last memory run: bg_1, orphaned" in shown
    assert loaded.record.subagent_run and loaded.record.parent_session_id == sid
    assert loaded.messages == []  # a bundle with less in it, never an unreadable one


# -- secrets -------------------------------------------------------------------------------

AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


async def test_a_save_holding_secrets_leaves_none_in_any_file_of_the_memory_run(paths):
    creds = (f"aws_access_key_id={AWS_ID} aws_secret_access_key={AWS_SECRET} "
             f"github token {GITHUB_TOKEN}")
    message = f"{creds} are my deploy credentials, remember them"
    save = {"title": "Deploy", "body": f"Deploy credentials: {creds}\n", "scope": "global",
            "relative_path": "deploy.md"}
    async with MemoryRoutedOpenAI() as server:
        server.child = [
            tool_calls(call("memory_save", save)),
            # The report repeats them, streamed in pieces that split the secrets.
            text(f"Saved:\n- Deploy credentials: {creds}", chunks=17),
        ]
        server.script(text("Noted."))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, message) == "end_turn"
    bundle = paths.sessions_dir / sid
    written = [p for d in ("background", "subagents") for p in (bundle / d).rglob("*")
               if p.is_file()]
    assert {"output.log", "meta.json", "messages.json", ".messages.json.spare",
            "session.json"} <= {p.name for p in written}
    leaks = [(p.relative_to(bundle), secret) for p in written
             for secret in (AWS_ID, AWS_SECRET, GITHUB_TOKEN) if secret in p.read_text()]
    assert leaks == []
    log = task_log(paths, sid, "bg_1")
    assert "[REDACTED:aws_access_key]" in log and "[REDACTED:github_token]" in log
    assert meta(paths, sid, "bg_1")["label"].startswith("memory: aws_access_key_id=[REDACTED:")
    # The child's transcript still holds its save, a document whose body is redacted.
    (asked,) = [c for m in child_messages(paths, sid) for c in m.get("toolCalls") or []]
    assert "[REDACTED:aws_secret_key]" in json.loads(asked["arguments"])["body"]
    # The note is redacted as ever; the parent's transcript keeps the user's words as typed.
    assert AWS_ID not in (paths.home / "memory" / "deploy.md").read_text()
    assert AWS_ID in (bundle / "messages.json").read_text()


async def test_the_memory_child_never_sees_a_secret_so_no_form_of_it_reaches_a_run_file(paths):
    # The offline child lowercases and splits what it searches for: a secret that reached
    # the child would slip past the redaction of its files in that form.
    cfg = Config(memory=MemoryConfig(enable=True))
    message = f"Remember that the aws key {AWS_ID} with secret {AWS_SECRET} is for staging."
    async with turn_agent(cfg, paths) as (ed, _):
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, message) == "end_turn"
    bundle = paths.sessions_dir / sid
    written = [p.read_text().lower() for d in ("background", "subagents")
               for p in (bundle / d).rglob("*") if p.is_file()]
    assert any("memory_save" in text for text in written)  # the run did save
    pieces = [AWS_ID, *AWS_SECRET.split("/")]
    assert [p for p in pieces for text in written if p.lower() in text] == []
