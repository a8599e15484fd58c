"""/coddy/sessions/{id}/memory over a real socket: the two roots as a tree, notes read,
written (redacted, bounded), deleted and folders made, with the tools' path rules."""

from __future__ import annotations

import os

import pytest
from httpkit import Api, served

from acp_memory.config import Config
from acp_memory.config.models import MemoryConfig

pytestmark = pytest.mark.anyio

SECRET = "sk-proj-" + "A1b2C3d4" * 5


def memory_url(sid: str, what: str) -> str:
    return f"/coddy/sessions/{sid}/memory/{what}"


async def put(api: Api, sid: str, root: str, path: str, content: str) -> dict:
    resp = await api.client.put(
        memory_url(sid, "file"), json={"root": root, "path": path, "content": content}
    )
    assert resp.status_code == 200, resp.text
    body: dict = resp.json()
    return body


async def test_without_a_root_the_tree_is_the_two_roots_of_the_session(paths, tmp_path):
    cfg = Config(memory=MemoryConfig(dir=str(tmp_path / "notes")))
    async with served(cfg, paths) as api:
        sid = await api.new_session()
        tree = (await api.client.get(memory_url(sid, "tree"))).json()
    assert tree == {
        "object": "memory_tree",
        "roots": [
            {"root": "global", "dir": str(tmp_path / "notes")},
            {"root": "workspace", "dir": str(paths.cwd / "memory")},
        ],
    }


async def test_a_root_lists_one_level_of_notes_and_folders_only(paths):
    workspace = paths.cwd / "memory"
    (workspace / "api" / "v2").mkdir(parents=True)
    (workspace / "api" / "auth.md").write_text("tokens rotate daily\n")
    (workspace / "todo.txt").write_text("ship it\n")
    (workspace / "diagram.png").write_bytes(b"\x89PNG")
    (workspace / ".hidden.md").write_text("no")
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        top = (await api.client.get(memory_url(sid, "tree"), params={"root": "workspace"})).json()
        api_dir = (await api.client.get(
            memory_url(sid, "tree"), params={"root": "workspace", "path": "api"}
        )).json()
        empty_global = (await api.client.get(
            memory_url(sid, "tree"), params={"root": "global"}
        )).json()
    assert top["object"] == "memory_tree" and top["root"] == "workspace" and top["path"] == ""
    assert [(e["name"], e["path"], e["type"]) for e in top["entries"]] == [
        ("api", "api", "dir"), ("todo.txt", "todo.txt", "file"),
    ]
    todo = top["entries"][1]
    assert todo["size"] == len("ship it\n") and todo["modified"].endswith("Z")
    assert [(e["path"], e["type"]) for e in api_dir["entries"]] == [
        ("api/v2", "dir"), ("api/auth.md", "file"),
    ]
    assert empty_global["entries"] == []


async def test_a_note_is_written_read_and_rewritten(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        saved = await put(api, sid, "workspace", "decisions/db.md", "We use SQLite.\n")
        read = (await api.client.get(
            memory_url(sid, "file"), params={"root": "workspace", "path": "decisions/db.md"}
        )).json()
        updated = await put(api, sid, "workspace", "decisions/db.md", "We use Postgres.\n")
    assert saved == {
        "object": "memory_file", "root": "workspace", "path": "decisions/db.md",
        "content": "We use SQLite.\n", "status": "saved", "redacted": [],
    }
    assert read == {
        "object": "memory_file", "root": "workspace", "path": "decisions/db.md",
        "content": "We use SQLite.\n",
    }
    assert updated["status"] == "updated"
    assert (paths.cwd / "memory" / "decisions" / "db.md").read_text() == "We use Postgres.\n"


async def test_a_secret_in_a_note_is_redacted_before_it_is_written(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        saved = await put(api, sid, "global", "keys.md", f"the key is {SECRET}\n")
    on_disk = (paths.home / "memory" / "keys.md").read_text()
    assert saved["redacted"] == ["openai_key"]
    assert SECRET not in saved["content"] and SECRET not in on_disk
    assert saved["content"] == on_disk == "the key is [REDACTED:openai_key]\n"


async def test_a_folder_is_made_and_deleted_with_every_note_under_it(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        made = (await api.client.post(
            memory_url(sid, "dir"), json={"root": "global", "path": "people/team"}
        )).json()
        again = (await api.client.post(
            memory_url(sid, "dir"), json={"root": "global", "path": "people/team"}
        )).json()
        await put(api, sid, "global", "people/team/ana.md", "Ana leads QA.\n")
        await put(api, sid, "global", "people/bob.md", "Bob writes docs.\n")
        gone = (await api.client.delete(
            memory_url(sid, "file"), params={"root": "global", "path": "people"}
        )).json()
    assert made == {"object": "memory_dir", "root": "global", "path": "people/team",
                    "created": True}
    assert again["created"] is False
    assert gone == {"object": "memory_delete", "root": "global", "path": "people", "deleted": 2}
    assert not (paths.home / "memory" / "people").exists()


async def test_a_single_note_is_deleted(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        await put(api, sid, "workspace", "a.md", "one\n")
        (paths.cwd / "memory" / "dead.md").symlink_to(paths.cwd / "memory" / "gone.md")
        gone = (await api.client.delete(
            memory_url(sid, "file"), params={"root": "workspace", "path": "a.md"}
        )).json()
        # A link whose note is gone is still there to delete.
        dead = await api.client.delete(
            memory_url(sid, "file"), params={"root": "workspace", "path": "dead.md"}
        )
    assert gone["deleted"] == 1 and not (paths.cwd / "memory" / "a.md").exists()
    assert dead.status_code == 200, dead.text
    assert not (paths.cwd / "memory" / "dead.md").is_symlink()


BAD_REQUESTS = [
    ("get", "file", {"root": "global", "path": "../outside.md"}, 400, "'..'"),
    ("get", "tree", {"root": "workspace", "path": "../../etc"}, 400, "'..'"),
    ("get", "file", {"root": "global", "path": "%2e%2e/x.md"}, 400, "percent-encoded"),
    ("put", "file", {"root": "global", "path": "/etc/passwd.md", "content": "x"}, 400,
     "absolute"),
    ("post", "dir", {"root": "workspace", "path": "a/../../b"}, 400, "'..'"),
    ("delete", "file", {"root": "global", "path": "../x.md"}, 400, "'..'"),
    ("delete", "file", {"root": "workspace", "path": ""}, 400, "workspace is a root"),
    ("delete", "file", {"root": "global", "path": "/"}, 400, "global is a root"),
    ("get", "file", {"root": "global", "path": "missing.md"}, 404, "nothing at"),
    ("delete", "file", {"root": "global", "path": "missing.md"}, 404, "nothing at"),
    ("get", "tree", {"root": "global", "path": "no/such/folder"}, 404, "no folder"),
    ("get", "file", {"root": "global", "path": "notes.pdf"}, 400, "not a note path"),
    ("get", "file", {"root": "elsewhere", "path": "a.md"}, 400, "root"),
    ("put", "file", {"root": "global", "path": "a.md"}, 400, "content"),
]


async def test_a_bad_memory_request_is_refused_with_its_status_and_reason(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        answers = []
        for method, what, args, _, _ in BAD_REQUESTS:
            where = "params" if method in ("get", "delete") else "json"
            answers.append(await api.client.request(
                method.upper(), memory_url(sid, what), **{where: args}
            ))
    for (method, what, args, status, says), resp in zip(BAD_REQUESTS, answers, strict=True):
        assert resp.status_code == status, (method, what, args, resp.text)
        assert says in resp.json()["error"]["message"], (method, what, args)
    assert not (paths.home / "outside.md").exists()


async def test_a_note_over_max_note_bytes_is_413_and_nothing_is_written(paths):
    cfg = Config(memory=MemoryConfig(max_note_bytes=100))
    async with served(cfg, paths) as api:
        sid = await api.new_session()
        resp = await api.client.put(
            memory_url(sid, "file"),
            json={"root": "global", "path": "big.md", "content": "x" * 101},
        )
        # Redaction lengthens this one past the limit: still 413, not a vague 400.
        grows = await api.client.put(
            memory_url(sid, "file"),
            json={"root": "global", "path": "pw.md", "content": "password: hunter2\n" * 5},
        )
    assert resp.status_code == 413 and grows.status_code == 413
    assert resp.json()["error"]["type"] == "request_too_large"
    assert "over the limit of 100 bytes" in resp.json()["error"]["message"]
    assert not (paths.home / "memory" / "big.md").exists()
    assert not (paths.home / "memory" / "pw.md").exists()


async def test_the_memory_routes_of_an_unknown_session_are_404(paths):
    async with served(Config(), paths) as api:
        resp = await api.client.get(memory_url("sess_" + "1" * 24, "tree"))
    assert resp.status_code == 404


async def test_project_is_taken_as_workspace_and_answers_say_workspace(paths):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        saved = await put(api, sid, "project", "notes/a.md", "tabs\n")
        made = (await api.client.post(
            memory_url(sid, "dir"), json={"root": "project", "path": "made"}
        )).json()
        top = (await api.client.get(memory_url(sid, "tree"), params={"root": "project"})).json()
        found = (await api.client.get(
            memory_url(sid, "search"), params={"q": "tabs", "root": "project"}
        )).json()
        bad = await api.client.get(
            memory_url(sid, "file"), params={"root": "project", "path": "notes/a.pdf"}
        )
    assert (saved["root"], made["root"], top["root"]) == ("workspace",) * 3
    assert [(h["root"], h["path"]) for h in found["hits"]] == [("workspace", "notes/a.md")]
    assert (paths.cwd / "memory" / "notes" / "a.md").read_text() == "tabs\n"
    assert bad.status_code == 400
    assert bad.json()["error"]["message"].startswith("workspace:notes/a.pdf is not a note path")


async def test_a_workspace_root_linking_out_of_the_workspace_is_absent(paths, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "theirs.md").write_text("not ours\n")
    (paths.cwd / "memory").symlink_to(outside)
    refusal = (f"project root {paths.cwd / 'memory'} links outside the workspace to {outside}; "
               "set memory.project_root_symlinks: allow")
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        tree = (await api.client.get(memory_url(sid, "tree"))).json()
        refused = [
            await api.client.get(memory_url(sid, "tree"), params={"root": "workspace"}),
            await api.client.get(
                memory_url(sid, "file"), params={"root": "workspace", "path": "theirs.md"}
            ),
            await api.client.put(
                memory_url(sid, "file"),
                json={"root": "workspace", "path": "theirs.md", "content": "overwritten"},
            ),
            await api.client.delete(
                memory_url(sid, "file"), params={"root": "workspace", "path": "theirs.md"}
            ),
            await api.client.post(memory_url(sid, "dir"), json={"root": "workspace", "path": "d"}),
            await api.client.get(
                memory_url(sid, "search"), params={"q": "ours", "root": "workspace"}
            ),
        ]
        both = (await api.client.get(memory_url(sid, "search"), params={"q": "ours"})).json()
    assert [r["root"] for r in tree["roots"]] == ["global"]
    for resp in refused:
        assert (resp.status_code, resp.json()["error"]["message"]) == (400, refusal)
    assert both["hits"] == []
    assert os.listdir(outside) == ["theirs.md"]
    assert (outside / "theirs.md").read_text() == "not ours\n"
