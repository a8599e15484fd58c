"""Built-in slash commands through the real agent: advertised to the editor, run without a
turn, the automatic memory run or (save /compact) a model call."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from engine.turnkit import (
    fake_config,
    prompt,
    stored_messages,
    turn_agent,
    updates_of,
)
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from harness import RecordingClient, in_process_agent
from runtime.test_memory_run import (
    REPORT,
    MemoryRoutedOpenAI,
    memory_config,
    memory_updates,
    task_dirs,
)
from wire_schema import validate_def

from acp_memory.build import build_runner
from acp_memory.config.models import Config, MemoryConfig
from acp_memory.engine.events import AgentText, TurnEvent
from acp_memory.engine.history import COMPACTED
from acp_memory.llm.registry import ProviderHub

pytestmark = pytest.mark.anyio

NAMES = ["compact", "export", "memory", "remember", "forget", "help"]


def said(ed: Any, sid: str) -> str:
    return "".join(u.content.text for u in updates_of(ed, sid, "agent_message_chunk"))


def answer_and_advert(ed: Any, method: str) -> tuple[int, int]:
    """Where the answer to the last `method` request and the commands update sit on the wire."""
    request_id = [i for i, m in ed.checker.client_requests.items() if m == method][-1]
    sent = ed.checker.sent
    answer = next(i for i, m in enumerate(sent) if m.get("id") == request_id and "result" in m)
    advert = max(
        i
        for i, m in enumerate(sent)
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
    )
    validate_def("SessionNotification", sent[advert]["params"])
    return answer, advert


async def test_the_commands_are_advertised_after_session_new_and_after_session_load(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        await ed.client.wait_for(lambda: sid in ed.client.commands)
        answer, advert = answer_and_advert(ed, "session/new")
        commands = ed.client.commands[sid]
    assert answer < advert  # the editor knows the session by the time it hears of them
    assert [c.name for c in commands] == NAMES
    hints = {c.name: c.input.root.hint if c.input else None for c in commands}
    assert hints["help"] is None
    assert hints["memory"] == ("log, undo [--force], pending, approve [ID|all], reject [ID|all], "
                              "tidy [global|project] (optional)")
    assert hints["remember"] == "what to remember" and "focus" in hints["compact"]
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
        await ed.client.wait_for(lambda: sid in ed.client.commands)
        answer, advert = answer_and_advert(ed, "session/load")
    assert answer < advert


async def test_help_runs_with_no_model_call_no_memory_run_and_no_transcript_entry(paths):
    async with MemoryRoutedOpenAI() as server:
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "/help") == "end_turn"
            reply = said(ed, sid)
            updates = memory_updates(ed)
    assert all(f"/{name}" in reply for name in NAMES)
    assert server.requests == [] and updates == [] and task_dirs(paths, sid) == []
    assert stored_messages(paths, sid) == []


async def test_an_unknown_slash_word_is_an_ordinary_prompt(paths):
    async with FakeOpenAI() as server:
        server.script(text("no such command here"))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "/helpme please") == "end_turn"
    assert server.requests[0].messages[1]["content"] == "/helpme please"
    assert [m["role"] for m in stored_messages(paths, sid)] == ["user", "assistant"]


async def test_compact_folds_the_history_and_later_requests_start_from_its_summary(paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)")] * 3
        server.script(
            text("FIRST-ANSWER"),
            text("SECOND-ANSWER"),
            text("SUMMARY: the user asked twice."),  # the /compact call
            text("after"),
        )
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "FIRST-QUESTION") == "end_turn"
            assert await prompt(ed, sid, "SECOND-QUESTION") == "end_turn"
            runs_before = len(memory_updates(ed))
            ed.client.updates.clear()
            assert await prompt(ed, sid, "/compact the questions") == "end_turn"
            reply = said(ed, sid)
            runs_after_compact = len(memory_updates(ed))
            assert await prompt(ed, sid, "THIRD-QUESTION") == "end_turn"
        compact_req, after_req = server.parent_requests[2:]
    assert runs_after_compact == runs_before  # the memory child plays no part
    assert "SUMMARY: the user asked twice." in reply
    # 54 characters of questions and answers, at about 4 a token.
    assert "(Compacted 4 messages, about 14 tokens; later requests" in reply
    # The summary request: the history as text, the focus, no tools.
    asked = json.dumps(compact_req.messages)
    assert "FIRST-QUESTION" in asked and "SECOND-ANSWER" in asked
    assert "Focus on: the questions" in compact_req.messages[-1]["content"]
    assert not compact_req.json.get("tools")
    # Later requests start from the summary: the folded messages are gone from them...
    history = [m["content"] for m in after_req.messages[1:-1]]
    assert history == [f"{COMPACTED}\n\nSUMMARY: the user asked twice.", "THIRD-QUESTION"]
    # ...but stay on disk, the marker after them.
    stored = stored_messages(paths, sid)
    assert [m["role"] for m in stored] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "compaction",
        "user",
        "assistant",
    ]
    assert stored[4]["content"] == "SUMMARY: the user asked twice."


async def test_load_replays_the_summary_after_the_history_it_folded(cfg, paths):
    async with FakeOpenAI() as server:
        server.script(text("FIRST-ANSWER"), text("THE-SUMMARY"))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "FIRST-QUESTION") == "end_turn"
            assert await prompt(ed, sid, "/compact") == "end_turn"
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
        replayed = [(u.session_update, u.content.text) for s, u in ed.client.updates if s == sid]
    assert replayed == [
        ("user_message_chunk", "FIRST-QUESTION"),
        ("agent_message_chunk", "FIRST-ANSWER"),
        ("agent_message_chunk", "THE-SUMMARY"),
    ]


async def test_compact_with_nothing_to_fold_asks_no_model(cfg, paths):
    async with FakeOpenAI() as server:
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "/compact") == "end_turn"
            reply = said(ed, sid)
    assert reply.startswith("Nothing to compact") and server.requests == []


async def test_export_writes_the_transcript_as_markdown_with_tool_calls_collapsed(paths):
    (paths.cwd / "a.txt").write_text("alpha")
    async with FakeOpenAI() as server:
        server.script(tool_calls(call("read_file", {"path": "a.txt"})), text("It says alpha."))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "What is in a.txt?") == "end_turn"
            assert await prompt(ed, sid, "/export") == "end_turn"
            reply = said(ed, sid)
            assert await prompt(ed, sid, "/export notes/chat.md") == "end_turn"
    written = (paths.cwd / f"{sid}.md").read_text()
    assert f"to {paths.cwd / f'{sid}.md'}" in reply
    assert written.startswith("# What is in a.txt?\n")
    assert "## User\n\nWhat is in a.txt?" in written
    assert "## Assistant\n\nIt says alpha." in written
    assert "<details><summary>Tool: " in written and "(completed)</summary>" in written
    assert "alpha" in written.split("<details>")[1]  # the result, inside the collapsed block
    assert (paths.cwd / "notes" / "chat.md").read_text() == written
    assert len(stored_messages(paths, sid)) == 4  # the commands added nothing


@pytest.mark.parametrize(("answer", "written"), [("reject_once", False), ("allow_once", True)])
async def test_export_outside_the_workspace_needs_the_users_permission(
    cfg, paths, tmp_path, answer, written
):
    target = tmp_path / "outside" / "chat.md"
    client = RecordingClient(permission_answers=[answer])
    async with in_process_agent(cfg, paths, client=client) as ed:
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, "hello") == "end_turn"
        ed.client.updates.clear()
        assert await prompt(ed, sid, f"/export {target}") == "end_turn"
        reply = said(ed, sid)
    assert len(client.permission_requests) == 1
    assert target.exists() is written
    assert reply.startswith("Exported" if written else "Not exported: permission denied")


async def test_export_to_a_folder_is_refused_in_one_line_naming_it(cfg, paths):
    (paths.cwd / "out").mkdir()
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, "hello") == "end_turn"
        ed.client.updates.clear()
        assert await prompt(ed, sid, "/export out") == "end_turn"
        reply = said(ed, sid)
    assert reply == f"Not exported: cannot write {(paths.cwd / 'out').resolve()}: Is a directory"


async def test_export_of_a_session_with_no_messages_writes_nothing_and_says_so(cfg, paths):
    client = RecordingClient(permission_answers=["allow_once"])
    async with in_process_agent(cfg, paths, client=client) as ed:
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, "/export") == "end_turn"
        reply = said(ed, sid)
    assert reply == "nothing to export"
    assert not (paths.cwd / f"{sid}.md").exists() and client.permission_requests == []


async def test_memory_shows_the_last_run_and_the_notes_of_both_roots(paths):
    notes = paths.home / "memory"
    notes.mkdir(parents=True)
    (notes / "fruit.md").write_text("The user's favourite fruit is the mango.\n")
    (notes / "photo.png").write_bytes(b"not a note")
    (notes / ".trash").mkdir()
    (notes / ".trash" / "old.md").write_text("hidden: not counted\n")
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT)]
        server.script(text("Mango."))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "/memory") == "end_turn"
            before = said(ed, sid)
            ed.client.updates.clear()
            assert await prompt(ed, sid, "What fruit?") == "end_turn"
            ed.client.updates.clear()
            assert await prompt(ed, sid, "/memory") == "end_turn"
            reply = said(ed, sid)
    assert "No memory run in this session yet." in before
    assert "Last memory run: bg_1, succeeded (" in reply
    assert "Delivery: report delivered to the turn (first request)." in reply
    assert REPORT in reply
    assert f"- global: 1 note in {notes}" in reply
    assert f"- project: 0 notes in {paths.cwd / 'memory'}" in reply
    assert len(server.child_requests) == 1  # /memory itself started none


async def test_memory_reads_a_run_recorded_before_runs_had_a_cost(paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT)]
        server.script(text("Mango."))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "What fruit?") == "end_turn"
        record = paths.sessions_dir / sid / "background" / "bg_1" / "meta.json"
        older = json.loads(record.read_text())
        del older["cost"]
        record.write_text(json.dumps(older))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
            ed.client.updates.clear()
            assert await prompt(ed, sid, "/memory") == "end_turn"
            reply = said(ed, sid)
    assert "Last memory run: bg_1, succeeded (" in reply and "Cost:" not in reply
    assert "Delivery: report delivered to the turn (first request)." in reply


def offline_memory() -> Config:
    cfg = Config()
    cfg.memory = MemoryConfig(enable=True, wait_seconds=30)
    return cfg


async def test_remember_and_forget_each_run_one_persist_memory_run_whose_report_is_the_reply(
    paths,
):
    notes = paths.home / "memory"
    async with turn_agent(offline_memory(), paths) as (ed, _):
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, "/remember I drink green tea every morning") == "end_turn"
        remembered = said(ed, sid)
        saved = [p.read_text() for p in notes.rglob("*.md")]
        ed.client.updates.clear()
        assert await prompt(ed, sid, "/forget I drink green tea every morning") == "end_turn"
        forgot = said(ed, sid)
        updates = memory_updates(ed)
    assert remembered == "Saved to global memory: I drink green tea every morning"
    assert any("green tea" in note for note in saved)
    assert forgot.startswith("Deleted:") and "green tea" in forgot
    assert not [p for p in notes.rglob("*.md") if "green tea" in p.read_text()]
    # Exactly one ordinary memory run each, its report delivered as the reply.
    assert [(u["status"], u.get("taskId")) for u in updates] == [
        ("started", "bg_1"),
        ("finished", "bg_1"),
        ("started", "bg_2"),
        ("finished", "bg_2"),
    ]
    assert all(u["delivered"] for u in updates if u["status"] == "finished")
    assert stored_messages(paths, sid) == []  # no turn ran beside them
    log = (paths.sessions_dir / sid / "background" / "bg_1" / "output.log").read_text()
    assert log.splitlines()[-1] == "report delivered to the turn (as the command's reply)"


async def test_remember_is_refused_in_ask_mode_and_past_the_bounds(paths):
    async with turn_agent(offline_memory(), paths) as (ed, agent):
        sid = await ed.start_session(paths.cwd)
        await ed.conn.set_session_mode(session_id=sid, mode_id="ask")
        assert await prompt(ed, sid, "/remember I like tea") == "end_turn"
        in_ask = said(ed, sid)
        await ed.conn.set_session_mode(session_id=sid, mode_id="agent")
        agent.runner.memory.bounds.session_limit = 0
        ed.client.updates.clear()
        assert await prompt(ed, sid, "/forget I like tea") == "end_turn"
        past_bounds = said(ed, sid)
        updates = memory_updates(ed)
    assert in_ask.startswith("/remember is unavailable in ask mode")
    assert past_bounds == "No memory run: memory runs in flight for this session: 0 of 0."
    assert updates == [
        {
            "sessionUpdate": "memory_run",
            "status": "skipped",
            "reason": "memory runs in flight for this session: 0 of 0",
            "_meta": {"acpMemory": {"kind": "turn"}},
        }
    ]
    assert task_dirs(paths, sid) == []


async def test_commands_run_through_the_runner_for_every_surface(cfg, paths):
    said: list[str] = []

    async def emit(event: TurnEvent) -> None:
        if isinstance(event, AgentText):
            said.append(event.text)

    async with ProviderHub(cfg) as hub:
        runner = build_runner(cfg, paths, hub)
        async with runner.running():
            session = await runner.create_session(str(paths.cwd))
            with anyio.fail_after(10):
                stop = await runner.run_turn(session, "/help", emit)
            session.close()
    assert stop == "end_turn" and "/compact" in "".join(said)
