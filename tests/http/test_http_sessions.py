"""/coddy/sessions over a real socket: create, list, read, prompt, cancel, delete, and the
events stream that carries each turn's updates, memory_run among them."""

from __future__ import annotations

import anyio
import pytest
from httpkit import BOUND_S, HeldProvider, events_of, memory_config, served, use_model

from acp_memory.config import Config
from acp_memory.sessions.store import SessionStore

pytestmark = pytest.mark.anyio

REMEMBER = "Remember that my favourite fruit is the mango."


async def test_a_session_is_created_listed_and_read(paths):
    async with served(Config(), paths) as api:
        created = (await api.client.post(
            "/coddy/sessions", json={"cwd": str(paths.cwd), "mode": "plan"}
        )).json()
        sid = created["id"]
        listed = (await api.client.get("/coddy/sessions")).json()
        one = (await api.client.get(f"/coddy/sessions/{sid}")).json()
        filtered = (await api.client.get("/coddy/sessions", params={"cwd": "/elsewhere"})).json()
    assert created["object"] == "session" and created["mode"] == "plan"
    assert created["selectedModelId"] == "offline/default"
    assert created["readOnly"] is False and created["running"] is False
    assert listed["object"] == "session_list" and [s["id"] for s in listed["sessions"]] == [sid]
    assert one == created
    assert filtered["sessions"] == []
    assert (paths.sessions_dir / sid / "session.json").is_file()


async def test_a_session_whose_id_the_user_chose_is_read_listed_and_deleted(paths):
    # As `acp --session-id example-acp-models` makes one.
    SessionStore(paths.sessions_dir).create(
        cwd=str(paths.cwd), model_id="offline/default", session_id="example-acp-models"
    ).close()
    async with served(Config(), paths) as api:
        listed = (await api.client.get("/coddy/sessions")).json()
        one = await api.client.get("/coddy/sessions/example-acp-models")
        deleted = await api.client.delete("/coddy/sessions/example-acp-models")
    assert [s["id"] for s in listed["sessions"]] == ["example-acp-models"]
    assert one.status_code == 200 and one.json()["id"] == "example-acp-models"
    assert deleted.status_code == 200 and not (paths.sessions_dir / "example-acp-models").exists()


BAD_NEW_SESSIONS = [
    ({"cwd": "relative/dir"}, "must be an absolute path"),
    ({"cwd": "/no/such/folder"}, "no such folder"),
    ({"mode": "yolo"}, "mode"),
    ({"model": "nobody/nothing"}, "unknown model 'nobody/nothing'"),
    ({"cwd_typo": "/tmp"}, "cwd_typo"),
]


async def test_a_bad_new_session_is_400_naming_the_problem(paths):
    async with served(Config(), paths) as api:
        answers = [
            await api.client.post("/coddy/sessions", json={"cwd": str(paths.cwd), **body})
            for body, _ in BAD_NEW_SESSIONS
        ]
    for (body, says), resp in zip(BAD_NEW_SESSIONS, answers, strict=True):
        assert resp.status_code == 400, body
        error = resp.json()["error"]
        assert error["type"] == "invalid_request_error" and says in error["message"], body
    assert not paths.sessions_dir.exists()


async def test_an_unknown_session_is_404_on_every_session_route(paths):
    missing = "sess_" + "0" * 24
    async with served(Config(), paths) as api:
        answers = [
            await api.client.get(f"/coddy/sessions/{missing}"),
            await api.client.get(f"/coddy/sessions/{missing}/messages"),
            await api.prompt(missing, "hi"),
            await api.client.post(f"/coddy/sessions/{missing}/cancel"),
            await api.client.delete(f"/coddy/sessions/{missing}"),
            await api.client.get(f"/coddy/sessions/{missing}/events"),
            await api.client.get("/coddy/sessions/not-an-id"),
        ]
    for resp in answers:
        assert resp.status_code == 404, resp.request.url
        assert resp.json()["error"]["type"] == "not_found_error"


async def test_a_prompt_answers_with_its_stop_reason_and_its_updates_go_to_the_events_stream(
    paths,
):
    async with served(memory_config(), paths) as api:
        sid = await api.new_session()
        async with events_of(api, sid) as events:
            resp = await api.prompt(sid, REMEMBER)
            messages = (await api.client.get(f"/coddy/sessions/{sid}/messages")).json()
            reply = messages["messages"][-1]["content"]
            # Everything was sent before the prompt answered; the reader may still be behind.
            await events.wait_for(lambda: events.said() == reply)
    assert resp.status_code == 200
    assert resp.json() == {"object": "prompt_result", "sessionId": sid, "stopReason": "end_turn"}
    started, finished = events.memory_runs()
    assert started["status"] == "started" and finished["status"] == "finished"
    assert started["_meta"] == {"acpMemory": {"kind": "turn"}}
    assert finished["_meta"]["acpMemory"]["kind"] == "turn"
    assert finished["taskId"] == started["taskId"] == "bg_1"
    assert finished["taskStatus"] == "succeeded" and finished["delivered"] is True
    # Each event is named after its update; the report reached the reply.
    assert all(name == data["sessionUpdate"] for name, data in events.events)
    assert "From memory:\nSaved to global memory: My favourite fruit is the mango." in reply
    assert messages["object"] == "session_messages" and messages["readOnly"] is False
    assert [m["role"] for m in messages["messages"]] == ["user", "assistant"]
    assert messages["messages"][0]["content"] == REMEMBER


async def test_a_memory_childs_session_and_transcript_are_read_only_with_their_parent(paths):
    async with served(memory_config(), paths) as api:
        sid = await api.new_session()
        assert (await api.prompt(sid, REMEMBER)).status_code == 200
        task = (await api.client.get(f"/coddy/sessions/{sid}/background-tasks")).json()["tasks"][0]
        child = task["agent"]["session_id"]
        record = (await api.client.get(f"/coddy/sessions/{child}")).json()
        transcript = (await api.client.get(f"/coddy/sessions/{child}/messages")).json()
        refused = await api.prompt(child, "hello")
        listed = (await api.client.get("/coddy/sessions")).json()["sessions"]
    assert record["readOnly"] is True and record["parentSessionId"] == sid
    assert record["subagentName"] == "memory" and record["subagentTaskId"] == task["id"]
    assert transcript["readOnly"] is True and transcript["parentSessionId"] == sid
    calls = [c["name"] for m in transcript["messages"] for c in m.get("toolCalls", [])]
    assert "memory_save" in calls
    assert refused.status_code == 400 and "read-only" in refused.json()["error"]["message"]
    assert [s["id"] for s in listed] == [sid]  # children are not top-level sessions


async def test_a_second_prompt_while_one_runs_is_409_and_cancel_ends_the_first(paths):
    held = HeldProvider()
    async with served(Config(), paths) as api:
        use_model(api, held)
        sid = await api.new_session()
        answer: dict[str, object] = {}

        async def first() -> None:
            answer["resp"] = await api.prompt(sid, "hold on")

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            with anyio.fail_after(BOUND_S):
                await held.started.wait()
            busy = await api.prompt(sid, "me too")
            running = (await api.client.get(f"/coddy/sessions/{sid}")).json()["running"]
            cancel = (await api.client.post(f"/coddy/sessions/{sid}/cancel")).json()
        idle_cancel = (await api.client.post(f"/coddy/sessions/{sid}/cancel")).json()
    assert busy.status_code == 409 and busy.json()["error"]["type"] == "conflict_error"
    assert running is True
    assert cancel == {"object": "session_cancel", "sessionId": sid, "cancelled": True}
    assert answer["resp"].json()["stopReason"] == "cancelled"  # type: ignore[attr-defined]
    assert held.cancelled.is_set()
    assert idle_cancel["cancelled"] is False


async def test_delete_removes_the_bundle_with_its_memory_children_and_ends_its_stream(paths):
    async with served(memory_config(), paths) as api:
        sid = await api.new_session()
        assert (await api.prompt(sid, REMEMBER)).status_code == 200
        child_dir = next((paths.sessions_dir / sid / "subagents").iterdir())
        async with events_of(api, sid) as events:
            deleted = await api.client.delete(f"/coddy/sessions/{sid}")
            await events.wait_for(lambda: events.ended)
        after = await api.client.get(f"/coddy/sessions/{sid}")
        child_after = await api.client.get(f"/coddy/sessions/{child_dir.name}")
    assert deleted.json() == {"object": "session_delete", "sessionId": sid, "deleted": True}
    assert not (paths.sessions_dir / sid).exists()
    assert after.status_code == 404 and child_after.status_code == 404


async def test_delete_stops_a_running_memory_run_before_the_bundle_goes(paths):
    held = HeldProvider()
    async with served(memory_config(wait_seconds=0), paths) as api:
        use_model(api, held, child=True)
        sid = await api.new_session()
        assert (await api.prompt(sid, "What do I like?")).status_code == 200
        with anyio.fail_after(BOUND_S):
            await held.started.wait()
        deleted = await api.client.delete(f"/coddy/sessions/{sid}")
        assert held.cancelled.is_set()  # stopped before the answer, not after it
    assert deleted.status_code == 200
    # The stopped run's record was written before the bundle went, not into a new one.
    assert not (paths.sessions_dir / sid).exists()


async def test_a_memory_child_cannot_be_deleted_on_its_own(paths):
    async with served(memory_config(), paths) as api:
        sid = await api.new_session()
        assert (await api.prompt(sid, REMEMBER)).status_code == 200
        child = next((paths.sessions_dir / sid / "subagents").iterdir()).name
        resp = await api.client.delete(f"/coddy/sessions/{child}")
    assert resp.status_code == 400 and "read-only" in resp.json()["error"]["message"]
    assert (paths.sessions_dir / sid / "subagents" / child).is_dir()
