"""The tidy run: its proposals held (a merge one held change over several paths, with its
reason), approved and rejected whole, made at once with apply and undone; a scripted child on
the fake model server; the offline model's tidy of a fixed set of notes."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from commands.test_memory_history_commands import reply
from engine.turnkit import fake_config, turn_agent
from fakes.clock import FakeClock
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from memory.notes_kit import notes_runner
from runtime.test_memory_run import memory_updates

from acp_memory.config import Config, Paths
from acp_memory.config.models import OFFLINE_MODEL_ID, MemoryConfig, TidyConfig
from acp_memory.engine.prompt import Templates
from acp_memory.llm.registry import ProviderHub
from acp_memory.memory.history.journal import Journal
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.history.service import History
from acp_memory.memory.history.summary import change_json, change_line
from acp_memory.memory.history.upgrade import VERSION
from acp_memory.memory.proposals import Proposals
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.memory.tidy import Group
from acp_memory.runtime.tidy_run import NOTHING_TO_TIDY, run_tidy
from acp_memory.sessions.store import SessionStore

TIDY = ChangeSource("tidy")
OLD = "We build with make.\nTests live in tests/.\n"
NEW = "We build with make.\nTests live in tests/.\nLint with ruff.\n"
BUILD = ("We build the project with make and run the tests with pytest from the repository "
         "root before every push to the main branch.\n")


@pytest.fixture
def store(paths: Paths) -> Iterator[MemoryStore]:
    with MemoryStore.from_config(Config(), paths, paths.cwd, source=TIDY) as store:
        yield store


def history(store: MemoryStore) -> History:
    return History.of_every_root(store, "add --force")


def note(store: MemoryStore, path: str) -> Path:
    return store.locate(path).path


def two_duplicates(store: MemoryStore) -> None:
    store.write("project:build-old.md", OLD)
    store.write("project:build.md", NEW)


# -- held changes ----------------------------------------------------------------------------


def test_a_merge_is_one_held_change_over_its_paths_with_its_reason(store: MemoryStore) -> None:
    two_duplicates(store)
    proposals = Proposals(store)
    said = proposals.propose("merge", ["project:build.md", "project:build-old.md"],
                             NEW, "duplicates: build-old.md said what build.md says")
    (held,) = history(store).held()
    assert said.startswith(f"held for approval ({held.id}): merge project:build.md, "
                           "project:build-old.md")
    assert held.reason == "duplicates: build-old.md said what build.md says"
    assert [(p.path, p.action) for p in held.all_parts] == [
        ("build.md", "update"), ("build-old.md", "delete")]
    # Nothing is written by a proposal.
    assert note(store, "project:build-old.md").read_text() == OLD
    # Shown with its reason and its other path.
    assert change_line(held, store.journal).endswith(  # type: ignore[arg-type]
        "; with delete project:build-old.md; why: duplicates: build-old.md said what "
        "build.md says")
    shown = change_json(held, store.journal, "project")  # type: ignore[arg-type]
    assert shown["reason"] == held.reason
    assert shown["also"] == [{"path": "build-old.md", "action": "delete"}]


def test_approving_a_merge_makes_every_path_and_notes_undo_reverses_each(
    store: MemoryStore,
) -> None:
    two_duplicates(store)
    store.write("project:build.md", OLD)  # the newer note, before the merge's body
    Proposals(store).propose("merge", ["project:build.md", "project:build-old.md"], NEW,
                             "duplicates")
    (held,) = history(store).held()
    history(store).approve(held.id)
    assert note(store, "project:build.md").read_text() == NEW
    assert not note(store, "project:build-old.md").exists()
    assert history(store).held() == []
    made = history(store).changes(limit=2)
    assert [(c.action, c.path) for c in made] == [("delete", "build-old.md"),
                                                 ("update", "build.md")]
    for change in made:
        history(store).undo(change.id)
    assert note(store, "project:build-old.md").read_text() == OLD
    assert note(store, "project:build.md").read_text() == OLD


def test_a_merge_whose_other_note_changed_since_is_refused_whole(store: MemoryStore) -> None:
    two_duplicates(store)
    Proposals(store).propose("merge", ["project:build.md", "project:build-old.md"],
                             NEW + "More.\n", "duplicates")
    (held,) = history(store).held()
    store.write("project:build-old.md", "changed by hand\n")
    with pytest.raises(NoteError, match=r"build-old\.md changed since"):
        history(store).approve(held.id)
    # Neither path was written: the kept note is as it was, too.
    assert note(store, "project:build.md").read_text() == NEW
    assert note(store, "project:build-old.md").read_text() == "changed by hand\n"


def test_rejecting_a_merge_writes_nothing(store: MemoryStore) -> None:
    two_duplicates(store)
    made = [c.id for c in history(store).changes(limit=10)]
    Proposals(store).propose("merge", ["project:build.md", "project:build-old.md"],
                             NEW + "Merged.\n", "duplicates")
    (held,) = history(store).held()
    history(store).reject(held.id)
    assert history(store).held() == []
    assert note(store, "project:build-old.md").read_text() == OLD
    # Neither the kept note nor the journal gained anything from the merge.
    assert note(store, "project:build.md").read_text() == NEW
    assert [c.id for c in history(store).changes(limit=10)] == made


def test_apply_makes_a_proposal_at_once_as_journaled_changes_undo_reverses(
    store: MemoryStore,
) -> None:
    store.write("project:stale.md", "Entry point: src/gone.py\nWe use uv.\n")
    proposals = Proposals(store, apply=True)
    said = proposals.propose("update", ["project:stale.md"], "We use uv.\n",
                             "cites src/gone.py, gone")
    assert said.startswith("made (pnd_")
    assert note(store, "project:stale.md").read_text() == "We use uv.\n"
    assert history(store).held() == []
    (change,) = history(store).changes(limit=1)
    assert change.source == TIDY
    history(store).undo(change.id)
    assert note(store, "project:stale.md").read_text() == "Entry point: src/gone.py\nWe use uv.\n"


def test_a_proposal_without_a_reason_or_over_a_missing_note_is_refused(
    store: MemoryStore,
) -> None:
    store.write("project:a.md", "A.\n")
    with pytest.raises(NoteError, match="one-line reason"):
        Proposals(store).propose("delete", ["project:a.md"], "", "  ")
    with pytest.raises(NoteError, match="is not a note"):
        Proposals(store).propose("delete", ["project:none.md"], "", "gone")
    assert history(store).held() == []


def test_a_journal_of_version_1_gains_the_held_changes_reason_and_parts(tmp_path: Path) -> None:
    db_path = tmp_path / "journal.sqlite3"
    db = sqlite3.connect(db_path)
    db.executescript("""
        CREATE TABLE blobs(hash TEXT PRIMARY KEY, data BLOB NOT NULL,
                           redacted INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE pending(
            id TEXT PRIMARY KEY, time TEXT NOT NULL, scope TEXT NOT NULL, root TEXT NOT NULL,
            path TEXT NOT NULL, action TEXT NOT NULL, before TEXT, after TEXT,
            surface TEXT NOT NULL, session_id TEXT, task_id TEXT, message TEXT);
        INSERT INTO pending VALUES ('pnd_000000000001', '2099-01-01T00:00:00.000Z', 'global',
            '/r', 'a.md', 'delete', NULL, NULL, 'cli', NULL, NULL, NULL);
        PRAGMA user_version = 1;
    """)
    db.close()
    journal = Journal(db_path)
    try:
        (held,) = journal.held()
        assert held.reason is None and held.parts == ()
        with journal.use() as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == VERSION == 2
    finally:
        journal.close()


# -- the run -----------------------------------------------------------------------------------


def tidy_config(server: FakeOpenAI | None = None) -> Config:
    cfg = fake_config(server.base_url) if server is not None else Config()
    cfg.memory = MemoryConfig(enable=True)
    return cfg


async def tidy(cfg: Config, paths: Paths, store: MemoryStore, groups: Sequence[Group],
               model_id: str, *, apply: bool = False):  # type: ignore[no-untyped-def]
    child = SessionStore(paths.sessions_dir / "tidy").create(
        cwd=str(paths.cwd), model_id=model_id, durable=False)
    try:
        async with ProviderHub(cfg) as hub:
            return await run_tidy(cfg, store, "project", child=child,
                                  models=[hub.model(model_id, wait_for_limit_reset=False)],
                                  templates=Templates(cfg.prompts.dir),
                                  candidates=lambda _s, _scope, _n: list(groups), apply=apply)
    finally:
        child.close()


@pytest.mark.anyio
async def test_a_scripted_childs_merge_is_held_with_its_reason(
    paths: Paths, store: MemoryStore
) -> None:
    two_duplicates(store)
    groups = [Group("duplicate", ("project:build.md", "project:build-old.md"), "overlap 0.9")]
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("memory_read", {"path": "project:build.md"}),
                       call("memory_read", {"path": "project:build-old.md"})),
            tool_calls(call("propose_change", {
                "kind": "merge", "paths": ["project:build.md", "project:build-old.md"],
                "body": NEW, "reason": "duplicates: the same build facts"})),
            text("Proposed one merge."),
        )
        outcome = await tidy(tidy_config(server), paths, store, groups, "fake/m")
        first = server.requests[0].json
    tools = sorted(t["function"]["name"] for t in first["tools"])
    assert tools == ["memory_list", "memory_read", "memory_search", "propose_change"]
    (task,) = [m["content"] for m in first["messages"]
               if m["role"] == "user" and "Tidy the notes" in m["content"]]
    assert task.splitlines()[-1] == (
        "- duplicate | project:build.md | project:build-old.md | why: overlap 0.9")
    assert outcome.report == "Proposed one merge."
    (held,) = outcome.held
    assert held.reason == "duplicates: the same build facts" and outcome.made == []
    assert [h.id for h in history(store).held()] == [held.id]
    assert note(store, "project:build-old.md").read_text() == OLD  # nothing written


@pytest.mark.anyio
async def test_no_candidates_is_no_child_and_nothing_held(paths: Paths, store: MemoryStore) -> None:
    outcome = await tidy(tidy_config(), paths, store, [], OFFLINE_MODEL_ID)
    assert outcome.report == NOTHING_TO_TIDY and outcome.held == []
    # The child's bundle was never given a task: no model was asked.
    (transcript,) = (paths.sessions_dir / "tidy").glob("*/messages.json")
    assert json.loads(transcript.read_text())["messages"] == []


def near_duplicates(store: MemoryStore) -> None:
    """0.84 of their 3-word shingles shared: near duplicates, the newer (build.md) written
    later."""
    store.write("project:build-old.md", BUILD + "Docs live in docs.\n")
    store.write("project:build.md", BUILD)


def near_duplicates_on_disk(paths: Paths) -> None:
    """The near duplicates written before any agent runs, as `notes write` would."""
    with MemoryStore.from_config(Config(), paths) as cli:
        near_duplicates(cli)


@asynccontextmanager
async def tidy_session(paths: Paths) -> AsyncIterator[tuple[Any, Any, str]]:
    """The editor, the agent and a session of theirs over a project holding the near
    duplicates, memory on."""
    near_duplicates_on_disk(paths)
    async with turn_agent(tidy_config(), paths) as (ed, agent):
        yield ed, agent, await ed.start_session(paths.cwd)


def fixed_set(store: MemoryStore, paths: Paths) -> list[Group]:
    """Duplicates, a changed fact, a stale citation; the newer of each pair written later."""
    near_duplicates(store)
    store.write("project:editor-old.md", "My editor is vim.\nMy shell is fish.\n")
    store.write("project:editor.md", "My editor is helix.\n")
    (paths.cwd / "src").mkdir()
    (paths.cwd / "src" / "app.py").write_text("")
    store.write("project:layout.md", "Entry point: src/gone.py\nApp code: src/app.py\n")
    return [
        Group("duplicate", ("project:build.md", "project:build-old.md"), "overlap 0.8"),
        Group("contradiction", ("project:editor.md", "project:editor-old.md"), "editor"),
        Group("stale", ("project:layout.md",), "cites src/gone.py"),
    ]


@pytest.mark.anyio
async def test_the_offline_tidy_merges_keeps_the_newest_and_drops_a_stale_line(
    paths: Paths, store: MemoryStore
) -> None:
    groups = fixed_set(store, paths)
    outcome = await tidy(tidy_config(), paths, store, groups, OFFLINE_MODEL_ID, apply=True)
    assert outcome.refused == [] and len(outcome.made) == 3
    assert note(store, "project:build.md").read_text() == BUILD + "Docs live in docs.\n"
    assert not note(store, "project:build-old.md").exists()
    assert note(store, "project:editor-old.md").read_text() == "My shell is fish.\n"
    assert note(store, "project:editor.md").read_text() == "My editor is helix.\n"
    assert note(store, "project:layout.md").read_text() == "App code: src/app.py\n"
    assert [h.reason for h in outcome.made] == [
        "duplicates: project:build-old.md said what project:build.md says",
        "contradicted by the newer project:editor.md",
        "cites src/gone.py, gone from the workspace",
    ]


@pytest.mark.anyio
async def test_the_offline_tidy_holds_its_proposals_without_apply(
    paths: Paths, store: MemoryStore
) -> None:
    groups = fixed_set(store, paths)
    before = {p.name: p.read_bytes() for p in (paths.cwd / "memory").iterdir()}
    outcome = await tidy(tidy_config(), paths, store, groups, OFFLINE_MODEL_ID)
    assert len(outcome.held) == 3 and outcome.made == []
    assert {p.name: p.read_bytes() for p in (paths.cwd / "memory").iterdir()} == before
    assert all(h.id in outcome.report for h in outcome.held)
    # Held in the journal, for the user to approve later.
    assert sorted(h.id for h in history(store).held()) == sorted(h.id for h in outcome.held)


# -- notes tidy ------------------------------------------------------------------------------


def test_notes_tidy_holds_then_applies_and_notes_undo_reverses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = notes_runner(tmp_path, capsys)
    assert run("write", "project:build-old.md", stdin=BUILD + "Docs live in docs.\n")[0] == 0
    assert run("write", "project:build.md", stdin=BUILD)[0] == 0
    code, out, err = run("tidy", "--json")
    assert (code, err) == (0, "")
    shown = json.loads(out)
    (held,) = shown["held"]
    assert held["paths"] == ["project:build.md", "project:build-old.md"]
    assert held["actions"] == ["update", "delete"] and held["reason"].startswith("duplicates")
    assert (tmp_path / "w" / "memory" / "build-old.md").exists()  # held: nothing written
    code, out, _ = run("pending")
    assert held["id"] in out and "with delete project:build-old.md; why: duplicates" in out
    assert run("reject", held["id"])[0] == 0
    code, out, _ = run("tidy", "--apply")
    assert code == 0 and out.startswith("project: 1 candidate group(s)\nmade pnd_")
    assert not (tmp_path / "w" / "memory" / "build-old.md").exists()
    code, out, _ = run("log", "--json", "--limit", "2")
    made = json.loads(out)
    assert [c["action"] for c in made] == ["delete", "update"]
    assert {c["source"]["surface"] for c in made} == {"tidy"}
    for change in made:
        assert run("undo", change["id"], "-y")[0] == 0
    assert (tmp_path / "w" / "memory" / "build-old.md").read_text() == (
        BUILD + "Docs live in docs.\n")
    assert (tmp_path / "w" / "memory" / "build.md").read_text() == BUILD



def test_notes_tidy_keeps_the_newest_keep_runs_of_its_bundles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = notes_runner(tmp_path, capsys)
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "config.yaml").write_text("memory: {enable: true, keep_runs: 2}\n")
    assert run("write", "project:build-old.md", stdin=BUILD + "Docs live in docs.\n")[0] == 0
    assert run("write", "project:build.md", stdin=BUILD)[0] == 0
    folder = tmp_path / "h" / "sessions" / "tidy"
    kept: list[set[str]] = []
    for _ in range(3):
        assert run("tidy")[0] == 0
        kept.append({p.name for p in folder.iterdir()})
    assert [len(k) for k in kept] == [1, 2, 2]
    assert kept[2] == (kept[1] - kept[0]) | (kept[2] - kept[1])  # the oldest one went

@pytest.mark.anyio
async def test_memory_tidy_holds_its_proposals_for_the_session_to_approve(paths: Paths) -> None:
    async with tidy_session(paths) as (ed, _, sid):
        said = await reply(ed, sid, "/memory tidy")
        pending = await reply(ed, sid, "/memory pending")
        assert (paths.cwd / "memory" / "build-old.md").exists()
        approved = await reply(ed, sid, "/memory approve")
    assert said.startswith("project: 1 candidate group(s)\nheld pnd_")
    assert said.endswith("approve with `/memory approve ID|all`, or reject")
    held_id = said.split()[5].rstrip(":")
    assert held_id in pending and held_id in approved
    assert not (paths.cwd / "memory" / "build-old.md").exists()
    assert (paths.cwd / "memory" / "build.md").read_text() == BUILD + "Docs live in docs.\n"
    (child,) = (paths.sessions_dir / sid / "subagents").iterdir()  # its own bundle
    assert "Tidy the notes of project:" in (child / "messages.json").read_text()


@pytest.mark.anyio
async def test_memory_tidy_is_a_memory_run_the_editor_sees_started_and_finished(
    paths: Paths,
) -> None:
    async with tidy_session(paths) as (ed, agent, sid):
        said = await reply(ed, sid, "/memory tidy")
        updates = memory_updates(ed)
        pool = agent.runner.pool_for(agent.table.sessions[sid])
        (record,) = await pool.records(include_system=True)  # the Tasks drawer's list
        undo = await reply(ed, sid, "/memory undo")
    assert said.startswith("project: 1 candidate group(s)\nheld pnd_")
    started, finished = updates
    assert started == {"sessionUpdate": "memory_run", "status": "started", "taskId": record.id,
                       "childSessionId": started["childSessionId"],
                       "_meta": {"acpMemory": {"kind": "tidy"}}}
    assert (paths.sessions_dir / sid / "subagents" / started["childSessionId"]).is_dir()
    assert finished["status"] == "finished" and finished["taskStatus"] == "succeeded"
    assert finished["taskId"] == record.id and finished["delivered"] is False
    cost = finished["_meta"]["acpMemory"]
    assert cost["kind"] == "tidy" and cost["modelCalls"] >= 1  # metered as any memory run
    # Not the turn's run /memory undo takes: a tidy run made no change.
    assert undo == "No memory run in this session yet: nothing to undo."


@pytest.mark.anyio
async def test_memory_tidy_past_the_memory_runs_bounds_is_skipped_saying_so(
    paths: Paths,
) -> None:
    async with tidy_session(paths) as (ed, agent, sid):
        bounds = agent.runner.memory.bounds
        for _ in range(bounds.session_limit):  # the session's runs in flight, all taken
            assert bounds.admit(sid, object()) is None
        said = await reply(ed, sid, "/memory tidy")
        updates = memory_updates(ed)
    reason = "memory runs in flight for this session: 2 of 2"
    assert said == f"No tidy run: {reason}."
    assert updates == [{"sessionUpdate": "memory_run", "status": "skipped", "reason": reason,
                        "_meta": {"acpMemory": {"kind": "tidy"}}}]
    assert not (paths.sessions_dir / sid / "subagents").exists()


@pytest.mark.anyio
async def test_memory_pending_shows_and_approves_a_sessionless_tidy_proposal(
    paths: Paths,
) -> None:
    with MemoryStore.from_config(Config(), paths, source=TIDY) as cli:
        two_duplicates(cli)
        # As `notes tidy` or the background pass holds it: in no session.
        Proposals(cli).propose("merge", ["project:build.md", "project:build-old.md"], NEW,
                               "duplicates")
        (held,) = history(cli).held()
    async with turn_agent(tidy_config(), paths) as (ed, _):
        sid = await ed.start_session(paths.cwd)
        pending = await reply(ed, sid, "/memory pending")
        approved = await reply(ed, sid, "/memory approve")
    assert held.source.session_id is None
    assert pending.startswith("1 change waiting for approval") and held.id in pending
    assert approved.startswith(f"- approved {held.id}: update project:build.md")
    assert not (paths.cwd / "memory" / "build-old.md").exists()


@pytest.mark.anyio
async def test_the_background_pass_holds_its_proposals_every_every_hours(paths: Paths) -> None:
    near_duplicates_on_disk(paths)
    cfg = tidy_config()
    cfg.memory.tidy = TidyConfig(every_hours=1)
    clock = FakeClock()
    async with turn_agent(cfg, paths) as (ed, agent):
        agent.runner.clock = clock
        await ed.start_session(paths.cwd)
        await ed.start_session(paths.cwd)  # a second session on the roots adds no loop
        with anyio.fail_after(60):
            assert await clock.until_pending(2) == [3600.0, 3600.0]  # global and project
            clock.advance(3599)
            assert clock.pending() == [3600.0, 3600.0]
            with MemoryStore.from_config(Config(), paths) as cli:
                assert history(cli).held() == []  # nothing before its hour
            clock.advance(1)
            await clock.until_pending(2)  # both passes done, the next hour waited for
        assert clock.pending() == [7200.0, 7200.0]
    with MemoryStore.from_config(Config(), paths) as cli:
        (held,) = history(cli).held()
    assert held.source.surface == "tidy" and held.reason is not None
    assert (paths.cwd / "memory" / "build-old.md").exists()  # held, never made


def test_a_sweep_keeps_the_contents_only_a_held_merges_other_path_names(
    store: MemoryStore,
) -> None:
    store.write("project:build.md", NEW)
    # Written by hand: no change of the history names its text, only the merge will.
    note(store, "project:build-old.md").write_text(OLD)
    Proposals(store).propose("merge", ["project:build.md", "project:build-old.md"], NEW,
                             "duplicates")
    (held,) = history(store).held()
    journal = store.journal.disk  # type: ignore[union-attr]
    with journal.use(write=True) as db:
        journal.sweep(db)
    assert journal.blob(str(held.parts[0].before).removeprefix("note:")) == OLD.encode()
