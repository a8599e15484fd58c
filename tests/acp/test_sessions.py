from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil

import pytest
from acp import RequestError, text_block
from acp.schema import EnvVariable, McpServerStdio
from harness import in_process_agent
from test_session_lifecycle import request

from acp_memory.acp.server import build_agent
from acp_memory.llm.registry import ProviderHub
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import Session, SessionNotFound, SessionStore

pytestmark = pytest.mark.anyio


async def test_new_session_writes_a_bundle_with_the_documented_fields(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        server = McpServerStdio(
            name="files",
            command="/usr/bin/mcp-files",
            args=["--ro"],
            env=[EnvVariable(name="GITHUB_TOKEN", value="ghp_supersecretvalue")],
        )
        resp = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[server])
    sid = resp.session_id
    assert sid.startswith("sess_") and len(sid) == 29
    int(sid[5:], 16)
    record = json.loads((paths.sessions_dir / sid / "session.json").read_text())
    assert record["id"] == sid and record["cwd"] == str(paths.cwd)
    assert record["mode"] == "agent" and record["selectedModelId"] == "offline/default"
    assert record["version"] == 1 and "updatedAt" in record and record["agentMemory"] == ""
    assert record["mcpServers"][0]["command"] == "/usr/bin/mcp-files"
    # Credentials handed to MCP servers are never written to disk.
    assert record["mcpServers"][0]["env"] == [{"name": "GITHUB_TOKEN", "value": "***"}]
    assert "ghp_supersecretvalue" not in (paths.sessions_dir / sid / "session.json").read_text()
    messages = json.loads((paths.sessions_dir / sid / "messages.json").read_text())
    assert messages == {"version": 1, "messages": []}


async def test_prompt_records_user_message_and_reply_in_the_transcript(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        resp = await ed.conn.prompt(session_id=sid, prompt=[text_block("the sky is green")])
        assert resp.stop_reason == "end_turn"
        streamed = ed.client.text(sid)
    assert "offline model" in streamed and "the sky is green" in streamed
    stored = json.loads((paths.sessions_dir / sid / "messages.json").read_text())["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[0]["content"] == "the sky is green"
    assert stored[1]["content"] == streamed
    title = json.loads((paths.sessions_dir / sid / "session.json").read_text())["title"]
    assert title == "the sky is green"


async def test_embedded_text_resources_and_links_reach_the_model(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        await ed.conn.prompt(
            session_id=sid,
            prompt=[
                text_block("look at"),
                {"type": "resource_link", "uri": "file:///a.py", "name": "a.py"},
                {"type": "resource", "resource": {"uri": "file:///b.py", "text": "print(1)"}},
            ],
        )
    stored = json.loads((paths.sessions_dir / sid / "messages.json").read_text())["messages"]
    assert "file:///a.py" in stored[0]["content"] and "print(1)" in stored[0]["content"]


async def test_an_audio_prompt_is_refused_clearly(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        with pytest.raises(RequestError) as err:
            await ed.conn.prompt(
                session_id=sid, prompt=[{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]
            )
    assert err.value.code == -32602 and "audio" in str(err.value)


async def test_load_replays_the_whole_transcript_before_answering(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        await ed.conn.prompt(session_id=sid, prompt=[text_block("first")])
        await ed.conn.prompt(session_id=sid, prompt=[text_block("second")])
    async with in_process_agent(cfg, paths) as ed:  # a fresh agent: only the disk knows
        await ed.conn.initialize(protocol_version=1)
        resp = await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
        kinds = ed.client.kinds(sid)
        users = ed.client.text(sid, "user_message_chunk")
    assert kinds == [
        "user_message_chunk",
        "agent_message_chunk",
        "user_message_chunk",
        "agent_message_chunk",
    ]
    assert users == "firstsecond"
    assert resp.modes.current_mode_id == "agent"
    # The answer came after every replayed update.
    load_id = next(i for i, m in ed.checker.client_requests.items() if m == "session/load")
    answer_at = next(
        i for i, m in enumerate(ed.checker.sent) if m.get("id") == load_id and "result" in m
    )
    updates_at = [
        i
        for i, m in enumerate(ed.checker.sent)
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] != "available_commands_update"  # after it
    ]
    assert max(updates_at) < answer_at


async def test_a_loaded_session_continues_its_conversation(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        await ed.conn.prompt(session_id=sid, prompt=[text_block("remember kiwi")])
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
        ed.client.updates.clear()
        await ed.conn.prompt(session_id=sid, prompt=[text_block("what did I say?")])
        assert 'previous message was: "remember kiwi"' in ed.client.text(sid)


@pytest.mark.parametrize("broken", ["session.json", "messages.json"])
async def test_a_corrupt_bundle_fails_to_load_naming_the_file_and_is_left_untouched(
    cfg, paths, broken
):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
    target = paths.sessions_dir / sid / broken
    target.write_bytes(b'{"version": 1, "messages": [tru')
    before = (target.read_bytes(), os.stat(target).st_mtime_ns)
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as err:
            await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
        with pytest.raises(RequestError):
            await ed.conn.prompt(session_id=sid, prompt=[text_block("hi")])
    assert broken in str(err.value)
    assert (target.read_bytes(), os.stat(target).st_mtime_ns) == before


async def test_list_filters_by_cwd_pages_with_a_cursor_and_hides_children(cfg, paths, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    store = SessionStore(paths.sessions_dir)
    mine = [store.create(cwd=str(paths.cwd), model_id="offline/default") for _ in range(57)]
    store.create(cwd=str(other), model_id="offline/default")
    child = store.create(
        cwd=str(paths.cwd),
        model_id="offline/default",
        parent=mine[0],
        subagent_name="memory",
        subagent_task_id="bg_1",
        subagent_depth=1,
    )
    # A child bundle found at the top level (moved there by hand) is still not a session to list.
    shutil.copytree(child.dir, paths.sessions_dir / child.id)
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        first = await ed.conn.list_sessions(cwd=str(paths.cwd))
        assert first.next_cursor
        second = await ed.conn.list_sessions(cwd=str(paths.cwd), cursor=first.next_cursor)
        everything = await ed.conn.list_sessions()
        with pytest.raises(RequestError):
            await ed.conn.list_sessions(cursor="bogus!")
    listed = [s.session_id for s in first.sessions + second.sessions]
    assert sorted(listed) == sorted(s.id for s in mine)
    assert second.next_cursor is None
    assert len(everything.sessions) == 50 and everything.next_cursor
    assert all(s.cwd == str(paths.cwd) for s in first.sessions + second.sessions)


async def test_a_child_bundle_nests_under_the_parents_subagents_folder(paths):
    store = SessionStore(paths.sessions_dir)
    parent = store.create(cwd=str(paths.cwd), model_id="offline/default")
    child = _memory_child(store, parent, "bg_3")
    record = json.loads(
        (paths.sessions_dir / parent.id / "subagents" / child.id / "session.json").read_text()
    )
    assert record["subagentRun"] is True and record["parentSessionId"] == parent.id
    assert record["subagentName"] == "memory" and record["subagentTaskId"] == "bg_3"
    assert record["subagentDepth"] == 1


async def test_paging_neither_repeats_nor_skips_when_a_session_changes_between_pages(cfg, paths):
    store = SessionStore(paths.sessions_dir)
    created = [store.create(cwd=str(paths.cwd), model_id="offline/default") for _ in range(60)]
    for s in created:
        s.close()
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        first = await ed.conn.list_sessions()
        on_first = {s.session_id for s in first.sessions}
        moved = next(s.id for s in created if s.id not in on_first)
        # A session not yet listed becomes the newest while the client pages.
        await ed.conn.set_session_mode(session_id=moved, mode_id="plan")
        second = await ed.conn.list_sessions(cursor=first.next_cursor)
    listed = [s.session_id for s in first.sessions + second.sessions]
    assert len(listed) == len(set(listed)), "a session was listed twice"
    assert set(listed) == {s.id for s in created} - {moved}
    assert second.next_cursor is None


@pytest.mark.parametrize("kind", ["missing", "a file"])
async def test_a_session_needs_an_existing_folder_as_its_cwd(cfg, paths, kind):
    cwd = paths.cwd / "nope"
    if kind == "a file":
        cwd.write_text("not a folder")
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as err:
            await ed.conn.new_session(cwd=str(cwd), mcp_servers=[])
    assert err.value.code == -32602
    assert "cwd" in str(err.value) and str(cwd) in str(err.value)
    assert not paths.sessions_dir.exists() or not any(paths.sessions_dir.iterdir())


async def test_a_sessions_folder_that_cannot_be_created_is_a_clear_error(cfg, paths, caplog):
    paths.home.mkdir()
    blocker = paths.home / "blocker"
    blocker.write_text("a file where a folder should be")
    paths = dataclasses.replace(paths, sessions_dir=blocker / "sessions")
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as err:
            await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
    assert err.value.code == -32603
    assert str(err.value).startswith("cannot create the session: ")
    assert str(blocker) in str(err.value) and "Not a directory" in str(err.value)
    assert "Traceback" not in caplog.text


async def test_a_prompt_in_a_session_another_process_is_writing_is_refused_clearly(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        async with in_process_agent(cfg, paths) as other:
            await other.conn.initialize(protocol_version=1)
            await other.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
            # The first agent holds the bundle: the second may read and replay, not write.
            with pytest.raises(RequestError) as err:
                await other.conn.prompt(session_id=sid, prompt=[text_block("hi")])
        assert err.value.code == -32001
        assert "another acp-memory process" in str(err.value)
        resp = await ed.conn.prompt(session_id=sid, prompt=[text_block("still mine")])
        assert resp.stop_reason == "end_turn"


async def test_a_child_session_loads_for_reading_and_refuses_prompts_and_changes(cfg, paths):
    store = SessionStore(paths.sessions_dir)
    parent = store.create(cwd=str(paths.cwd), model_id="offline/default")
    child = _memory_child(store, parent, "bg_1")
    await child.append(TranscriptMessage(role="user", content="what do the notes say?"))
    for s in (parent, child):
        s.close()
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.load_session(session_id=child.id, cwd=str(paths.cwd), mcp_servers=[])
        assert ed.client.text(child.id, "user_message_chunk") == "what do the notes say?"
        with pytest.raises(RequestError) as prompted:
            await ed.conn.prompt(session_id=child.id, prompt=[text_block("hi")])
        with pytest.raises(RequestError) as switched:
            await ed.conn.set_session_mode(session_id=child.id, mode_id="ask")
        listed = await ed.conn.list_sessions()
    for err in (prompted, switched):
        assert err.value.code == -32602
        assert "read-only" in str(err.value) and parent.id in str(err.value)
    assert [s.session_id for s in listed.sessions] == [parent.id]
    assert len(_stored_messages(child.dir)) == 1


def _stored_messages(folder) -> list:
    return json.loads((folder / "messages.json").read_text())["messages"]


def _memory_child(store: SessionStore, parent: Session, task_id: str) -> Session:
    return store.create(
        cwd=parent.record.cwd,
        model_id="offline/default",
        parent=parent,
        subagent_name="memory",
        subagent_task_id=task_id,
        subagent_depth=1,
    )


# -- acp --session-id ------------------------------------------------------------------------

NAMED = "sess_0123456789abcdef01234567"


def _named_agent(cfg, paths, session_id: str = NAMED):
    return build_agent(cfg, paths, ProviderHub(cfg), first_session_id=session_id)


async def test_session_id_creates_that_session_at_the_first_session_new_only(cfg, paths):
    async with in_process_agent(cfg, paths, _named_agent(cfg, paths)) as ed:
        await ed.conn.initialize(protocol_version=1)
        first = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
        second = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
        await ed.conn.prompt(session_id=NAMED, prompt=[text_block("hello")])
    assert first.session_id == NAMED and second.session_id != NAMED
    record = json.loads((paths.sessions_dir / NAMED / "session.json").read_text())
    assert record["id"] == NAMED and record["cwd"] == str(paths.cwd)
    assert [m["role"] for m in _stored_messages(paths.sessions_dir / NAMED)] == [
        "user", "assistant"
    ]


async def test_session_id_opens_an_existing_session_and_replays_it_after_the_answer(
    cfg, paths, tmp_path
):
    async with in_process_agent(cfg, paths, _named_agent(cfg, paths)) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
        await ed.conn.prompt(session_id=NAMED, prompt=[text_block("remember kiwi")])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with in_process_agent(cfg, paths, _named_agent(cfg, paths)) as ed:  # a new process
        await ed.conn.initialize(protocol_version=1)
        resp = await ed.conn.new_session(cwd=str(elsewhere), mcp_servers=[])
        await ed.client.wait_for(lambda: len(ed.client.kinds(NAMED)) == 2)
        replayed = ed.client.kinds(NAMED)
        said = ed.client.text(NAMED, "user_message_chunk")
        await ed.client.wait_for(lambda: NAMED in ed.client.commands)
        ed.client.updates.clear()
        await ed.conn.prompt(session_id=NAMED, prompt=[text_block("what did I say?")])
        continued = ed.client.text(NAMED)
    assert resp.session_id == NAMED and resp.modes.current_mode_id == "agent"
    assert replayed == ["user_message_chunk", "agent_message_chunk"]
    assert said == "remember kiwi"
    assert 'previous message was: "remember kiwi"' in continued
    record = json.loads((paths.sessions_dir / NAMED / "session.json").read_text())
    assert record["cwd"] == str(elsewhere)  # the client's cwd, as session/load takes it
    # The replay followed the answer: the client knew the session by then.
    new_id = next(i for i, m in ed.checker.client_requests.items() if m == "session/new")
    answer_at = next(
        i for i, m in enumerate(ed.checker.sent) if m.get("id") == new_id and "result" in m
    )
    updates_at = [i for i, m in enumerate(ed.checker.sent) if m.get("method") == "session/update"]
    assert answer_at < min(updates_at)


async def test_session_id_of_a_folder_without_its_record_is_refused_and_left_untouched(
    cfg, paths
):
    folder = paths.sessions_dir / NAMED
    folder.mkdir(parents=True)
    (folder / "messages.json").write_text('{"version":1,"messages":[]}  ')
    async with in_process_agent(cfg, paths, _named_agent(cfg, paths)) as ed:
        await ed.conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as err:
            await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
        with pytest.raises(RequestError) as again:  # the failed one did not use the id up
            await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
    assert err.value.code == again.value.code == -32002
    assert f"{folder / 'session.json'} is missing" in str(err.value)
    assert sorted(p.name for p in folder.iterdir()) == ["messages.json"]
    assert (folder / "messages.json").read_text() == '{"version":1,"messages":[]}  '


async def test_a_session_id_the_user_chose_works_on_every_acp_request(cfg, paths):
    # The reference agent's model-selector script names its session so.
    named = "example-acp-models"
    async with in_process_agent(cfg, paths, _named_agent(cfg, paths, named)) as ed:
        await ed.conn.initialize(protocol_version=1)
        first = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
        await ed.conn.prompt(session_id=named, prompt=[text_block("remember kiwi")])
        await ed.conn.close_session(session_id=named)
    async with in_process_agent(cfg, paths) as ed:  # a new process: only the disk knows
        await ed.conn.initialize(protocol_version=1)
        listed = await ed.conn.list_sessions(cwd=str(paths.cwd))
        await ed.conn.load_session(session_id=named, cwd=str(paths.cwd), mcp_servers=[])
        said = ed.client.text(named, "user_message_chunk")
        await ed.conn.resume_session(session_id=named, cwd=str(paths.cwd))
        await ed.conn.prompt(session_id=named, prompt=[text_block("what did I say?")])
        continued = ed.client.text(named)
        assert await request(ed, "session/delete", {"sessionId": named}) == {}
    assert first.session_id == named and [s.session_id for s in listed.sessions] == [named]
    assert said == "remember kiwi" and 'previous message was: "remember kiwi"' in continued
    assert not (paths.sessions_dir / named).exists()


def test_a_session_id_is_any_safe_folder_name_and_the_ones_made_stay_sess_hex(paths):
    store = SessionStore(paths.sessions_dir)
    for named in ("example-acp-models", "A", "9.x_y-z", "x" * 64, "sess_0123"):
        store.create(cwd=str(paths.cwd), model_id="offline/default", session_id=named).close()
        assert store.load(named).id == named
    made = store.create(cwd=str(paths.cwd), model_id="offline/default")
    assert re.fullmatch(r"sess_[0-9a-f]{24}", made.id)
    # A memory run's child of a named session is found under it as under any other.
    parent = store.load("example-acp-models")
    child = _memory_child(store, parent, "bg_1")
    assert store.load(child.id).record.parent_session_id == "example-acp-models"


async def test_a_bundle_opens_only_under_the_id_its_record_holds(cfg, paths):
    # What a case-insensitive file system does when asked for `Kiwi` beside a `kiwi` bundle.
    store = SessionStore(paths.sessions_dir)
    store.create(cwd=str(paths.cwd), model_id="offline/default", session_id="kiwi").close()
    shutil.copytree(paths.sessions_dir / "kiwi", paths.sessions_dir / "Kiwi")
    record = (paths.sessions_dir / "Kiwi" / "session.json").read_text()
    with pytest.raises(SessionNotFound):
        store.load("Kiwi")
    async with in_process_agent(cfg, paths, _named_agent(cfg, paths, "Kiwi")) as ed:
        await ed.conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as err:
            await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
    assert err.value.code == -32002 and "is another session's" in str(err.value)
    assert (paths.sessions_dir / "Kiwi" / "session.json").read_text() == record


@pytest.mark.parametrize(
    "bad", ["../escape", "sess_../../escape", ".hidden", "-flag", "a b", "x" * 65, "a/b", "é"]
)
def test_a_bundle_is_made_only_under_a_session_id(paths, bad):
    store = SessionStore(paths.sessions_dir)
    with pytest.raises(ValueError, match="not a session id"):
        store.create(cwd=str(paths.cwd), model_id="offline/default", session_id=bad)
    assert not (paths.home / "escape").exists() and not paths.sessions_dir.exists()
