"""/coddy/sessions/{id}/memory/history, /undo and /pending over a real socket: the direct
edits of the API journaled as the user's (source http, never held), undone byte for byte,
refused over a later change or a hand edit unless forced, and held changes approved or
rejected."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from httpkit import Api, memory_config, served
from memory.test_history_cli import _CRASHING_WRITER
from test_http_memory import memory_url, put

from acp_memory.config import Config
from acp_memory.memory.history.purge import purge as purge_history
from acp_memory.memory.history.records import ChangeSource, Held
from acp_memory.memory.history.states import Captured

pytestmark = pytest.mark.anyio

KEYS = {"id", "time", "root", "path", "action", "source", "summary"}


async def history(api: Api, sid: str, **params: str) -> list[dict]:
    resp = await api.client.get(memory_url(sid, "history"), params=params)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["object"] == "memory_history"
    changes: list[dict] = body["changes"]
    return changes


async def undo(api: Api, sid: str, change_id: str, force: bool = False) -> tuple[int, dict]:
    resp = await api.client.post(
        memory_url(sid, "undo"), json={"change_id": change_id, "force": force}
    )
    return resp.status_code, resp.json()


def hold(api: Api, sid: str, project: Path, rel: str, text: str | None) -> Held:
    """A memory run's write of workspace:rel held for approval (as review: ask holds it)."""
    note = project / "memory" / rel
    before = Captured.note(note.read_bytes()) if note.exists() else Captured(None)
    after = Captured.note(text.encode()) if text is not None else Captured(None)
    action = "delete" if text is None else "update" if note.exists() else "create"
    journal = api.runner.memory.journal()
    source = ChangeSource("memory_run", sid, "bg_1", "remember the port")
    return journal.hold(("project", project / "memory", rel), action, before, after, source)


async def test_the_apis_own_edits_are_its_users_changes_newest_first(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        await api.client.post(memory_url(sid, "dir"), json={"root": "global", "path": "people"})
        await put(api, sid, "workspace", "db.md", "We use SQLite.\n")
        await put(api, sid, "workspace", "db.md", "We use Postgres.\nSince May.\n")
        await api.client.delete(memory_url(sid, "file"), params={"root": "workspace",
                                                                 "path": "db.md"})
        changes = await history(api, sid)
    assert [(c["action"], c["root"], c["path"]) for c in changes] == [
        ("delete", "workspace", "db.md"), ("update", "workspace", "db.md"),
        ("create", "workspace", "db.md"), ("mkdir", "global", "people"),
    ]
    assert all(set(c) == KEYS and c["id"].startswith("chg_") for c in changes)
    assert {str(c["source"]) for c in changes} == {
        str({"surface": "http", "sessionId": sid, "taskId": None, "message": None})
    }
    assert [c["summary"] for c in changes[:3]] == [
        "deleted, 28 bytes", "+2 -1 lines", "new note, 15 bytes",
    ]
    assert changes[0]["time"].endswith("Z")


async def test_the_history_is_filtered_by_root_and_path(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        await put(api, sid, "workspace", "api/auth.md", "Tokens rotate.\n")
        await put(api, sid, "workspace", "todo.md", "ship\n")
        await put(api, sid, "global", "api/auth.md", "Mine.\n")
        workspace = await history(api, sid, root="workspace")
        one_note = await history(api, sid, root="project", path="api/auth.md")
        a_folder = await history(api, sid, path="api")
        last = await history(api, sid, limit="1")
        escape = await api.client.get(memory_url(sid, "history"), params={"path": "../x"})
    assert [c["path"] for c in workspace] == ["todo.md", "api/auth.md"]
    assert [(c["root"], c["path"]) for c in one_note] == [("workspace", "api/auth.md")]
    assert [(c["root"], c["path"]) for c in a_folder] == [
        ("global", "api/auth.md"), ("workspace", "api/auth.md"),
    ]
    assert [c["root"] for c in last] == ["global"]
    assert escape.status_code == 400 and ".." in escape.json()["error"]["message"]


async def test_a_purge_shows_in_the_history_as_a_line_without_an_undo_of_its_own(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        await put(api, sid, "workspace", "db.md", "password: hunter2hunter2\n")
        journal = api.runner.memory.journal()
        _, purge_id = purge_history(journal, ("project", paths.cwd / "memory", "db.md"),
                                    ChangeSource("cli"))
        (purge,) = await history(api, sid, root="workspace", path="db.md")
        status, refused = await undo(api, sid, purge["id"])
    assert (purge["id"], purge["action"], purge["path"]) == (purge_id, "purge", "db.md")
    assert purge["summary"].startswith("history purged")
    assert status >= 400 and "a purge cannot be undone" in refused["error"]["message"]
    assert (paths.cwd / "memory" / "db.md").exists()


async def test_a_put_then_an_undo_restores_the_bytes_and_is_itself_a_change(paths):
    note = paths.cwd / "memory" / "db.md"
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        await put(api, sid, "workspace", "db.md", "We use SQLite.\r\nno newline at the end")
        before = note.read_bytes()
        await put(api, sid, "workspace", "db.md", "We use Postgres.\n")
        update = (await history(api, sid))[0]
        status, undone = await undo(api, sid, update["id"])
        changes = await history(api, sid, root="workspace", path="db.md")
    assert status == 200, undone
    assert note.read_bytes() == before
    assert undone == {
        "object": "memory_undo", "changeId": changes[0]["id"], "undone": update,
        "root": "workspace", "path": "db.md", "restored": 1, "redacted": 0,
    }
    assert changes[0]["action"] == "undo" and changes[0]["undoes"] == update["id"]
    assert changes[0]["source"]["surface"] == "http"


async def test_an_undone_folder_delete_brings_back_every_note(paths):
    people = paths.home / "memory" / "people"
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        await put(api, sid, "global", "people/ana.md", "Ana leads QA.\n")
        await put(api, sid, "global", "people/team/bob.md", "Bob writes docs.\n")
        await api.client.delete(memory_url(sid, "file"), params={"root": "global",
                                                                 "path": "people"})
        deleted = (await history(api, sid))[0]
        gone = not people.exists()
        status, undone = await undo(api, sid, deleted["id"])
    assert deleted["action"] == "rmdir" and deleted["summary"] == "deleted folder with 2 notes"
    assert gone and status == 200 and undone["restored"] == 2
    assert (people / "ana.md").read_text() == "Ana leads QA.\n"
    assert (people / "team" / "bob.md").read_text() == "Bob writes docs.\n"


async def test_an_undo_over_a_later_change_is_409_naming_it_unless_forced(paths):
    note = paths.cwd / "memory" / "db.md"
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        await put(api, sid, "workspace", "db.md", "We use SQLite.\n")
        await put(api, sid, "workspace", "db.md", "We use Postgres.\n")
        update, create = await history(api, sid)
        status, refused = await undo(api, sid, create["id"])
        kept = note.read_text()
        forced, undone = await undo(api, sid, create["id"], force=True)
    assert status == 409 and refused["error"]["type"] == "conflict_error"
    message = refused["error"]["message"]
    assert update["id"] in message and "workspace:db.md" in message and "project:" not in message
    assert kept == "We use Postgres.\n"
    assert forced == 200 and undone["restored"] == 0 and not note.exists()


async def test_an_undo_over_a_hand_edit_is_409_saying_so_unless_forced(paths):
    note = paths.cwd / "memory" / "db.md"
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        await put(api, sid, "workspace", "db.md", "We use SQLite.\n")
        await put(api, sid, "workspace", "db.md", "We use Postgres.\n")
        note.write_text("edited in an editor\n")
        update = (await history(api, sid))[0]
        status, refused = await undo(api, sid, update["id"])
        kept = note.read_text()
        forced, _ = await undo(api, sid, update["id"], force=True)
    assert status == 409 and "hand edit" in refused["error"]["message"]
    assert kept == "edited in an editor\n"
    assert forced == 200 and note.read_text() == "We use SQLite.\n"


async def test_an_unknown_change_or_another_projects_change_is_404(paths, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        theirs = await api.new_session(cwd=str(other))
        await put(api, theirs, "workspace", "db.md", "theirs\n")
        their_change = (await history(api, theirs))[0]
        unknown, body = await undo(api, sid, "chg_000000000000")
        foreign, refused = await undo(api, sid, their_change["id"])
        malformed = await api.client.post(memory_url(sid, "undo"), json={"force": True})
        no_session = await api.client.get(memory_url("sess_" + "0" * 24, "history"))
    assert unknown == 404 and body["error"]["type"] == "not_found_error"
    assert "chg_000000000000" in body["error"]["message"]
    assert foreign == 404 and "roots of this session" in refused["error"]["message"]
    assert (other / "memory" / "db.md").read_text() == "theirs\n"
    assert malformed.status_code == 400 and "change_id" in malformed.json()["error"]["message"]
    assert no_session.status_code == 404


async def test_a_put_is_never_held_even_when_writes_need_consent(paths):
    async with served(memory_config(review="ask"), paths) as api:
        sid = await api.new_session()
        await put(api, sid, "workspace", "db.md", "We use SQLite.\n")
        pending = (await api.client.get(memory_url(sid, "pending"))).json()
        changes = await history(api, sid)
    assert (paths.cwd / "memory" / "db.md").read_text() == "We use SQLite.\n"
    assert pending == {"object": "memory_pending", "pending": []}
    assert [(c["action"], c["source"]["surface"]) for c in changes] == [("create", "http")]


async def test_a_held_change_is_listed_for_its_session_and_approved(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        other = await api.new_session()
        held = hold(api, sid, paths.cwd, "port.md", "The API listens on 8080.\n")
        theirs = hold(api, other, paths.cwd, "theirs.md", "x\n")
        mine = (await api.client.get(memory_url(sid, "pending"))).json()
        every = (await api.client.get(memory_url(sid, "pending"), params={"all": "true"})).json()
        resp = await api.client.post(memory_url(sid, f"pending/{held.id}"), json={"approve": True})
        after = (await api.client.get(memory_url(sid, "pending"))).json()
        changes = await history(api, sid)
    item = {
        "id": held.id, "time": held.time, "root": "workspace", "path": "port.md",
        "action": "create", "summary": "new note, 25 bytes",
        "source": {"surface": "memory_run", "sessionId": sid, "taskId": "bg_1",
                   "message": "remember the port"},
    }
    assert mine == {"object": "memory_pending", "pending": [item]}
    assert [p["id"] for p in every["pending"]] == [held.id, theirs.id]
    assert resp.status_code == 200
    assert resp.json() == {"object": "memory_pending_decision", "approved": True,
                           "pending": item}
    assert (paths.cwd / "memory" / "port.md").read_text() == "The API listens on 8080.\n"
    assert after["pending"] == []
    assert [(c["action"], c["source"]["surface"], c["source"]["taskId"]) for c in changes] == [
        ("create", "memory_run", "bg_1")
    ]


async def test_a_tidy_runs_sessionless_proposal_is_listed_for_every_session_of_its_roots(
    paths,
):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        journal = api.runner.memory.journal()
        note = ("project", paths.cwd / "memory", "port.md")
        after = Captured.note(b"The API listens on 8080.\n")
        tidy = journal.hold(note, "create", Captured(None), after, ChangeSource("tidy"))
        # Sessionless, but no tidy run's: nobody's session sees it unasked.
        journal.hold(note, "create", Captured(None), after, ChangeSource("cli"))
        mine = (await api.client.get(memory_url(sid, "pending"))).json()
    assert [(p["id"], p["source"]["surface"]) for p in mine["pending"]] == [(tidy.id, "tidy")]


async def test_a_rejected_held_change_writes_nothing(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        held = hold(api, sid, paths.cwd, "port.md", "The API listens on 8080.\n")
        resp = await api.client.post(memory_url(sid, f"pending/{held.id}"),
                                     json={"approve": False})
        again = await api.client.post(memory_url(sid, f"pending/{held.id}"),
                                      json={"approve": False})
        changes = await history(api, sid)
    assert resp.status_code == 200 and resp.json()["approved"] is False
    assert not (paths.cwd / "memory" / "port.md").exists() and changes == []
    assert again.status_code == 404 and held.id in again.json()["error"]["message"]


async def test_approving_over_a_note_changed_since_it_was_held_is_409(paths):
    note = paths.cwd / "memory" / "port.md"
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        held = hold(api, sid, paths.cwd, "port.md", "The API listens on 8080.\n")
        await put(api, sid, "workspace", "port.md", "The port is 9000.\n")
        resp = await api.client.post(memory_url(sid, f"pending/{held.id}"), json={"approve": True})
        still = (await api.client.get(memory_url(sid, "pending"))).json()
        bad = await api.client.post(memory_url(sid, f"pending/{held.id}"), json={"yes": True})
    assert resp.status_code == 409 and "workspace:port.md changed since" in resp.json()[
        "error"]["message"]
    assert note.read_text() == "The port is 9000.\n"
    assert [p["id"] for p in still["pending"]] == [held.id]
    assert bad.status_code == 400


async def test_another_projects_held_change_is_not_listed_approved_or_rejected(paths, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        elsewhere = await api.new_session(cwd=str(other))
        mine = hold(api, sid, paths.cwd, "port.md", "The API listens on 8080.\n")
        theirs = hold(api, elsewhere, other, "db.md", "theirs\n")
        every = (await api.client.get(memory_url(sid, "pending"), params={"all": "true"})).json()
        decided = [await api.client.post(memory_url(sid, f"pending/{theirs.id}"),
                                         json={"approve": yes}) for yes in (True, False)]
        still = (await api.client.get(memory_url(elsewhere, "pending"))).json()
    assert [p["id"] for p in every["pending"]] == [mine.id]
    for resp in decided:
        assert resp.status_code == 404
        assert resp.json()["error"]["message"] == (
            f"pending change {theirs.id} is not in the roots of this session")
    assert not (other / "memory" / "db.md").exists()
    assert [p["id"] for p in still["pending"]] == [theirs.id]


async def test_the_history_settles_a_dead_writers_change_before_answering(paths):
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [sys.executable, "-c", _CRASHING_WRITER, str(paths.home), str(paths.cwd)],
            env={**os.environ, "ACP_MEMORY_TEST_CRASH": "after_note"}, check=False,
        )
    assert done.returncode == 3, done.stderr
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        changes = await history(api, sid)
        status, _ = await undo(api, sid, changes[0]["id"]) if changes else (0, {})
    assert [(c["action"], c["root"], c["path"]) for c in changes] == [("create", "global", "x.md")]
    assert status == 200 and not (paths.home / "memory" / "x.md").exists()


async def test_a_search_hit_says_when_and_by_whom_its_note_last_changed(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        await put(api, sid, "workspace", "fruit.md", "The mango is ripe.\n")
        await put(api, sid, "workspace", "veg.md", "The mango chutney.\n")
        (paths.cwd / "memory" / "veg.md").write_text("The mango chutney, by hand.\n")
        resp = await api.client.get(memory_url(sid, "search"), params={"q": "mango"})
        created = (await history(api, sid, path="fruit.md"))[0]
    hits = {h["path"]: h for h in resp.json()["hits"]}
    assert hits["fruit.md"]["source"] == "http"
    assert hits["fruit.md"]["changed"] == created["time"]
    assert hits["veg.md"]["source"] == "hand edit" and hits["veg.md"]["changed"].endswith("Z")


async def test_the_openapi_document_names_a_held_changes_reason_and_merged_paths(paths):
    async with served(Config(), paths) as api:
        doc = (await api.client.get("/openapi.json")).json()
    schemas = doc["components"]["schemas"]
    change = schemas["MemoryChange"]
    assert {"reason", "also"} <= set(change["properties"])
    assert not {"reason", "also"} & set(change["required"])  # left out when it has none
    assert change["properties"]["also"]["anyOf"][0]["items"] == {
        "$ref": "#/components/schemas/HeldPart"
    }
    assert set(schemas["HeldPart"]["properties"]) == {"path", "action"}
