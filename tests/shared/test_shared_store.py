"""The store on a shared project root: its writes and history go to PostgreSQL (one transaction
a change, the local copy written once it commits), another machine's store sees them after its
refresh, undo, review and purge work across machines, and a server out of reach leaves the
reads on the local copy, marked, and refuses the writes in one line with nothing written. The
global root keeps its history on disk."""

from __future__ import annotations

import io
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from acp_memory.cli import main
from acp_memory.config import Config, Paths
from acp_memory.config.models import MemoryConfig, SharedMemoryConfig
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.history.service import History
from acp_memory.memory.history.states import Captured
from acp_memory.memory.history.undo import ChangedSince
from acp_memory.memory.shared.root import close_all, shared_root_for
from acp_memory.memory.shared.schema import SCHEMA, SCHEMA_VERSION
from acp_memory.memory.store import CLI, MemoryStore, NoteError
from acp_memory.memory.tools import format_hits

# The HTTP tests' kit (an `acp-memory http` server in this process) lives beside them, where
# pytest puts it on sys.path only when it collects one of them.
sys.path.append(str(Path(__file__).resolve().parents[1] / "http"))
from httpkit import served

KEY = "github.com/team/repo"
RUN = ChangeSource("memory_run", "sess_a", "bg_1", "remember the build")

Machine = Callable[..., MemoryStore]


def shared_config(dsn: str) -> Config:
    return Config(memory=MemoryConfig(shared=SharedMemoryConfig(dsn=dsn, project=KEY)))


def machine_paths(tmp_path: Path, name: str) -> Paths:
    """One developer's machine: its own home and its own clone of the repository."""
    home = tmp_path / name
    clone = tmp_path / f"{name}-clone"
    clone.mkdir(parents=True, exist_ok=True)
    return Paths(home=home, config_file=home / "config.yaml", sessions_dir=home / "sessions",
                 cwd=clone)


@pytest.fixture
def machine(pg_dsn: str, tmp_path: Path) -> Iterator[Machine]:
    """`machine(name, source=...)`: a store built from config on that machine's home."""
    cfg = shared_config(pg_dsn)
    made: list[MemoryStore] = []

    def store_on(name: str, source: ChangeSource = CLI) -> MemoryStore:
        store = MemoryStore.from_config(cfg, machine_paths(tmp_path, name), source=source)
        made.append(store)
        return store

    yield store_on
    for store in made:
        store.close()
    close_all()


def rows(dsn: str, sql: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()


def caught_up(store: MemoryStore) -> None:
    """As a NOTIFY of another machine's change does: the next read catches up at once."""
    assert store.shared is not None
    store.shared.poke()  # type: ignore[attr-defined]


def test_a_project_save_goes_to_the_database_and_the_local_copy_and_global_stays_on_disk(
    machine: Machine, pg_dsn: str, tmp_path: Path
) -> None:
    store = machine("alice")
    copy_root = store.roots.project_root
    assert copy_root is not None and store.roots.shared_key == KEY
    assert copy_root.is_relative_to(tmp_path / "alice" / "cache" / "shared")

    saved = store.write("project:build.md", "run make check before pushing")
    store.write("global:me.md", "I like short answers")

    assert rows(pg_dsn, f"SELECT path, body FROM {SCHEMA}.notes WHERE project = %s AND "
                "body IS NOT NULL", KEY) == [("build.md", "run make check before pushing")]
    assert rows(pg_dsn, f"SELECT id, path, action FROM {SCHEMA}.history WHERE project = %s",
                KEY) == [(saved.change_id, "build.md", "create")]
    assert (copy_root / "build.md").read_text() == "run make check before pushing"
    assert store.read("project:build.md")[1] == "run make check before pushing"
    assert [e.loc.display for e in store.list_dir("project:")[1]] == ["project:build.md"]
    assert [h.path for h in store.search("make check", "project")] == ["project:build.md"]

    # The global root's change is in the home's SQLite journal, and only there.
    with sqlite3.connect(tmp_path / "alice" / "history" / "journal.sqlite3") as db:
        assert db.execute("SELECT scope, path FROM changes").fetchall() == [("global", "me.md")]
    history = History.of_session(store, "add --force")
    assert [(c.scope, c.path) for c in history.changes()] == [("global", "me.md"),
                                                              ("project", "build.md")]


def test_another_machine_finds_the_note_at_its_next_read_and_each_later_change(
    machine: Machine,
) -> None:
    alice, bob = machine("alice"), machine("bob")
    alice.write("project:build.md", "run make check")
    assert bob.read("project:build.md")[1] == "run make check"
    alice.write("project:build.md", "run make check, then make bench")
    alice.mkdir("project:deploy")
    caught_up(bob)
    assert [h.path for h in bob.search("bench", "project")] == ["project:build.md"]
    assert bob.read("project:build.md")[1] == "run make check, then make bench"
    assert [e.loc.display for e in bob.list_dir("project:")[1]] == ["project:deploy",
                                                                  "project:build.md"]


def test_undo_on_one_machine_of_the_others_change_reaches_both(
    machine: Machine, pg_dsn: str
) -> None:
    alice, bob = machine("alice"), machine("bob")
    alice.write("project:build.md", "first")
    change = alice.write("project:build.md", "second").change_id
    assert change is not None

    undone = History.of_session(bob, "add --force").undo(change)

    assert undone.undo_id is not None and bob.read("project:build.md")[1] == "first"
    caught_up(alice)
    assert alice.read("project:build.md")[1] == "first"
    assert rows(pg_dsn, f"SELECT body FROM {SCHEMA}.notes WHERE project = %s AND path = %s",
                KEY, "build.md") == [("first",)]
    assert [c.undoes for c in History.of_session(alice, "").changes(limit=1)] == [change]


def test_a_runs_undo_over_both_roots_is_all_or_nothing(machine: Machine) -> None:
    alice, bob = machine("alice", RUN), machine("bob")
    alice.write("project:build.md", "run make check")
    alice.write("project:style.md", "tabs")
    alice.write("global:me.md", "short answers")
    bob.write("project:style.md", "spaces", if_unchanged="tabs")  # a teammate's later change
    history = History.of_session(alice, "add --force")

    with pytest.raises(ChangedSince, match=r"project:style\.md changed since"):
        history.undo_run("bg_1", "sess_a")

    caught_up(alice)
    assert alice.read("project:build.md")[1] == "run make check"  # nothing was undone
    assert alice.read("global:me.md")[1] == "short answers"
    assert len(history.undo_run("bg_1", "sess_a", force=True).undone) == 3
    assert not (alice.roots.global_root / "me.md").exists()
    caught_up(bob)
    with pytest.raises(NoteError, match=r"no note at project:build\.md"):
        bob.read("project:build.md")


def test_a_held_change_is_approved_or_rejected_from_another_machine(
    machine: Machine, pg_dsn: str
) -> None:
    alice, bob = machine("alice", RUN), machine("bob")
    journal = alice.journal
    assert journal is not None
    loc = alice.locate("project:build.md")
    held = journal.hold((loc.scope, loc.root, loc.rel), "create", Captured(None),
                        Captured.note(b"run make check"), RUN)
    dropped = journal.hold((loc.scope, loc.root, "other.md"), "create", Captured(None),
                           Captured.note(b"never"), RUN)
    bobs = History.of_session(bob, "add --force")
    assert [h.id for h in bobs.held()] == [held.id, dropped.id]

    bobs.approve(held.id)
    bobs.reject(dropped.id)

    assert bobs.held() == []
    caught_up(alice)
    assert alice.read("project:build.md")[1] == "run make check"
    assert not (loc.root / "other.md").exists()
    made = History.of_session(alice, "").changes(limit=1)[0]
    assert (made.path, made.source.surface, made.source.task_id) == ("build.md", "memory_run",
                                                                   "bg_1")
    assert rows(pg_dsn, f"SELECT count(*) FROM {SCHEMA}.held") == [(0,)]


def test_a_write_over_a_note_a_teammate_changed_since_it_was_read_is_refused(
    machine: Machine,
) -> None:
    alice, bob = machine("alice"), machine("bob")
    alice.write("project:build.md", "first")
    opened = bob.read("project:build.md")[1]
    alice.write("project:build.md", "alice's")  # bob's copy has not caught up yet

    with pytest.raises(NoteError, match="changed by someone else since you opened it"):
        bob.write("project:build.md", "bob's", if_unchanged=opened)

    caught_up(alice)
    assert alice.read("project:build.md")[1] == "alice's"


def test_a_change_the_server_no_longer_holds_the_before_of_is_refused_in_its_own_line(
    machine: Machine, pg_dsn: str,
) -> None:
    alice = machine("alice")
    alice.write("project:build.md", "run make check")
    copy_root = alice.roots.project_root
    assert copy_root is not None
    # The copy holds what the server never took (as a writer killed mid-change once left it).
    (copy_root / "build.md").write_text("edited in the cache")

    with pytest.raises(NoteError) as refused:
        alice.write("project:build.md", "run make bench")
    assert str(refused.value) == ("project:build.md changed on the team's server just now; "
                                  "nothing was written, try again")
    assert rows(pg_dsn, f"SELECT body FROM {SCHEMA}.notes WHERE project = %s AND path = %s",
                KEY, "build.md") == [("run make check",)]


def test_purging_a_shared_path_asks_naming_the_whole_teams_history(
    machine: Machine, pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    alice = machine("alice")
    alice.write("project:secret.md", "first")
    alice.write("project:secret.md", "second")
    alice.write("project:kept.md", "kept")
    paths = machine_paths(tmp_path, "alice")
    paths.home.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(f"memory:\n  shared:\n    dsn: '{pg_dsn}'\n"
                                 f"    project: {KEY}\n")

    def notes(*argv: str, stdin: io.StringIO) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", stdin)
        code = main(["notes", *argv, "--home", str(paths.home), "--cwd", str(paths.cwd),
                     "--log-level", "warning"])
        out, err = capsys.readouterr()
        return code, out, err

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    code, _, err = notes("purge", "project:secret.md", stdin=Terminal("n\n"))
    assert code == 1
    assert (f"drop the whole team's history of project:secret.md (shared: {KEY}) from the "
            "memory history? It cannot be undone.") in err
    code, out, _ = notes("purge", "project:secret.md", "-y", stdin=Terminal(""))
    assert code == 0 and "purged project:secret.md from the memory history (2 changes)" in out
    assert rows(pg_dsn, f"SELECT path, action FROM {SCHEMA}.history WHERE project = %s "
                "ORDER BY seq", KEY) == [("kept.md", "create"), ("secret.md", "purge")]


def test_with_the_server_down_search_answers_from_the_copy_marked_and_writes_are_refused(
    machine: Machine, pg_server: object, pg_dsn: str
) -> None:
    alice = machine("alice")
    alice.write("project:build.md", "run make check")
    copy_root = alice.roots.project_root
    assert copy_root is not None
    pg_server.stop()  # type: ignore[attr-defined]
    try:
        caught_up(alice)
        hits = alice.search("make check", "both")
        assert [h.path for h in hits] == ["project:build.md"]
        assert hits.offline.startswith("shared memory offline: synced 20")
        assert f"({hits.offline})" in format_hits("make check", hits, "global and project")

        with pytest.raises(NoteError) as refused:
            alice.write("project:deploy.md", "never written")
        said = str(refused.value)
        assert said.startswith("cannot save project:deploy.md: shared project memory "
                               "postgresql://postgres@/")
        assert ": cannot connect: " in said and said.endswith("; nothing was written")
        assert "\n" not in said
        assert sorted(p.name for p in copy_root.iterdir()) == ["build.md"]
        alice.write("global:me.md", "the global root is on disk: still written")
    finally:
        pg_server.start()  # type: ignore[attr-defined]

    alice.write("project:deploy.md", "written once the server is back")
    assert rows(pg_dsn, f"SELECT path FROM {SCHEMA}.notes WHERE project = %s ORDER BY path",
                KEY) == [("build.md",), ("deploy.md",)]
    caught_up(alice)
    assert alice.search("make check", "project").offline == ""


@pytest.mark.anyio
async def test_the_http_search_says_the_shared_memory_is_offline_beside_its_hits(
    pg_server: object, pg_dsn: str, paths: Paths
) -> None:
    cfg = shared_config(pg_dsn)
    try:
        with MemoryStore.from_config(cfg, paths) as store:
            store.write("project:build.md", "run make check")
        async with served(cfg, paths) as api:
            sid = await api.new_session()
            search = f"/coddy/sessions/{sid}/memory/search"
            online = await api.client.get(search, params={"q": "make check"})
            assert "offline" not in online.json()
            pg_server.stop()  # type: ignore[attr-defined]
            try:
                shared_root_for(cfg, paths, KEY).poke()
                offline = await api.client.get(search, params={"q": "make check"})
            finally:
                pg_server.start()  # type: ignore[attr-defined]
        body = offline.json()
        assert offline.status_code == 200, offline.text
        assert [(h["root"], h["path"]) for h in body["hits"]] == [("workspace", "build.md")]
        assert body["offline"].startswith("shared memory offline: synced 20")
    finally:
        close_all()


def test_an_inline_snapshot_holds_the_teams_notes_as_they_are_when_the_session_opens(
    machine: Machine, pg_dsn: str, tmp_path: Path
) -> None:
    from acp_memory.memory.inline import session_memory

    machine("alice").write("project:build.md", "run make check before pushing")
    machine("bob")  # bob's copy syncs once, before alice's next note
    machine("alice").write("project:deploy.md", "deploy on Tuesdays")
    cfg = shared_config(pg_dsn)
    cfg.memory.inline = True
    bob = machine_paths(tmp_path, "bob")
    snapshot = session_memory(cfg, bob, str(bob.cwd))
    assert snapshot is not None
    assert "deploy on Tuesdays" in snapshot and "run make check" in snapshot


def test_a_schema_newer_than_this_build_refuses_writes_in_one_line_as_an_outage_does(
    machine: Machine, pg_dsn: str
) -> None:
    store = machine("alice")
    store.write("project:build.md", "run make check")
    rows(pg_dsn, f"UPDATE {SCHEMA}.meta SET value = '99' WHERE key = 'schema_version' "
         "RETURNING key")
    close_all()  # a new process: it meets the schema at its first connect
    newer = machine("bob")
    with pytest.raises(NoteError) as refused:
        newer.write("project:deploy.md", "ship on Tuesdays")
    assert str(refused.value) == (
        "cannot save project:deploy.md: the database's acp_memory schema is version 99, newer "
        f"than this acp-memory knows ({SCHEMA_VERSION}); upgrade acp-memory; nothing was written")
    assert newer.search("make check", "project").offline.startswith("shared memory offline")
