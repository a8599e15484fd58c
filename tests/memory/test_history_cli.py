"""`acp-memory notes log/undo/pending/approve/reject` through the real argument parser: the
history as people read it and scripts parse it, undo byte for byte, and the held changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from memory.notes_kit import Run, Terminal, notes_runner

from acp_memory.cli_parser import build_parser
from acp_memory.config import Config, resolve_paths
from acp_memory.memory.history.journal import Journal
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.history.states import Captured
from acp_memory.memory.store import MemoryStore

RUN = ChangeSource("memory_run", "sess_" + "a" * 24, "bg_3", "remember that I use uv")
CHANGE_KEYS = {"id", "time", "root", "path", "action", "source", "summary"}
SOURCE_KEYS = {"surface", "sessionId", "taskId", "message"}


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    return notes_runner(tmp_path, capsys)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    """The store `notes` opens for the same home and cwd, its changes made by a memory run."""
    (tmp_path / "w").mkdir(exist_ok=True)
    paths = resolve_paths(home=str(tmp_path / "h"), cwd=str(tmp_path / "w"))
    with MemoryStore.from_config(Config(), paths, source=RUN) as store:
        yield store


def last_id(run: Run) -> str:
    code, out, _ = run("log", "--json", "--limit", "1")
    assert code == 0
    return str(json.loads(out)[0]["id"])


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# -- undo ----------------------------------------------------------------------------------


@pytest.mark.parametrize("change", ["save", "update", "delete", "folder delete"])
def test_notes_undo_restores_the_bytes_before_a_save_an_update_a_delete_and_a_folder_delete(
    run: Run, store: MemoryStore, tmp_path: Path, change: str
) -> None:
    root = tmp_path / "h" / "memory"
    (root / "infra" / ".hidden").mkdir(parents=True)
    # Bytes no editor of ours would write: CRLF, no final newline, a stray Latin-1 byte.
    (root / "infra" / "deploy.md").write_bytes(b"Rotate keys\r\nmonthly \xe9")
    (root / "infra" / ".hidden" / "x.txt").write_bytes(b"hidden too\n")
    (root / "infra" / "empty").mkdir()
    before = tree(root)
    if change == "save":
        store.save("Tools", "I use uv.\n", "global")
    elif change == "update":
        store.write("global:infra/deploy.md", "Rotate keys weekly.\n")
    elif change == "delete":
        store.delete("global:infra/deploy.md")
    else:
        assert run("rm", "-r", "-y", "global:infra")[0] == 0
    assert tree(root) != before
    code, out, err = run("undo", last_id(run), "-y")
    assert (code, err) == (0, "")
    assert tree(root) == before
    assert (root / "infra" / "empty").is_dir()
    shown = {"save": "removed global:tools.md (it did not exist before)",
             "update": "restored global:infra/deploy.md",
             "delete": "restored global:infra/deploy.md",
             "folder delete": "restored global:infra/ (2 notes)"}[change]
    assert out.startswith("undid chg_") and f": {shown}; the undo is chg_" in out
    # The undo is itself a change, the newest.
    code, out, _ = run("log", "--json", "--limit", "1")
    assert json.loads(out)[0]["action"] == "undo"


def test_notes_undo_after_a_later_change_names_it_and_force_overrides(
    run: Run, store: MemoryStore, tmp_path: Path
) -> None:
    store.write("global:prefs.md", "tabs\n")
    store.write("global:prefs.md", "spaces\n")
    first, later = (c["id"] for c in reversed(json.loads(run("log", "--json")[1])))
    code, out, err = run("undo", first, "-y")
    assert (code, out) == (1, "")
    assert err.startswith(f"acp-memory notes: global:prefs.md changed since ({first}): by "
                          f"{later} (update, ")
    assert len(err.splitlines()) == 1
    assert err.endswith("; nothing was undone (notes undo --force undoes anyway)\n")
    assert (tmp_path / "h" / "memory" / "prefs.md").read_text() == "spaces\n"
    code, out, err = run("undo", first, "-y", "--force")
    assert (code, err) == (0, "") and out.startswith(f"undid {first}: removed global:prefs.md")
    assert not (tmp_path / "h" / "memory" / "prefs.md").exists()


def test_notes_undo_over_a_hand_edit_says_so_and_mentions_force(
    run: Run, store: MemoryStore, tmp_path: Path
) -> None:
    store.write("global:prefs.md", "tabs\n")
    (tmp_path / "h" / "memory" / "prefs.md").write_text("edited in vim\n")
    code, _, err = run("undo", last_id(run), "-y")
    assert code == 1 and "edited outside acp-memory" in err and "hand edit" in err
    assert len(err.splitlines()) == 1
    assert err.endswith("; nothing was undone (notes undo --force undoes anyway)\n")
    assert (tmp_path / "h" / "memory" / "prefs.md").read_text() == "edited in vim\n"


def test_notes_undo_of_a_change_undone_already_names_its_undo(
    run: Run, store: MemoryStore
) -> None:
    store.write("global:prefs.md", "tabs\n")
    change = last_id(run)
    assert run("undo", change, "-y")[0] == 0
    undo = last_id(run)
    code, out, err = run("undo", change, "-y")
    assert (code, out) == (1, "")
    assert err == (f"acp-memory notes: global:prefs.md: {change} already undone by {undo}; "
                   "nothing was undone\n")


def test_notes_undo_of_an_unknown_id_is_one_line_and_exit_1(run: Run) -> None:
    code, out, err = run("undo", "chg_000000000000", "-y")
    assert (code, out) == (1, "")
    assert err == ("acp-memory notes: no change 'chg_000000000000' in the memory history "
                   "(kept 90 days); see `notes log`\n")


def test_notes_undo_asks_on_a_terminal_and_without_one_wants_y(
    run: Run, store: MemoryStore, tmp_path: Path
) -> None:
    note = tmp_path / "h" / "memory" / "prefs.md"
    store.write("global:prefs.md", "tabs\n")
    change = last_id(run)
    code, out, err = run("undo", change)  # stdin is a pipe: no one to ask
    assert (code, out) == (1, "")
    assert err == (f"acp-memory notes: stdin is not a terminal to ask on; add -y to undo "
                   f"{change}\n")
    code, out, err = run("undo", change, stdin=Terminal("n\n"))
    assert (code, out) == (1, "") and note.exists()
    # It shows the change and what the undo puts back before asking.
    assert err.startswith(f"{change}  ") and "create  global:prefs.md: new note, 5 bytes" in err
    assert "put global:prefs.md back as it was before this change? [y/N] " in err
    assert err.endswith("nothing was undone\n")
    code, out, _ = run("undo", change, stdin=Terminal("y\n"))
    assert code == 0 and out.startswith(f"undid {change}") and not note.exists()


# -- log -----------------------------------------------------------------------------------


def test_notes_log_lists_both_roots_newest_first_with_source_and_summary(
    run: Run, store: MemoryStore, tmp_path: Path
) -> None:
    store.write("global:prefs.md", "tabs\n")
    store.write("global:prefs.md", "tabs\nwide\n")
    store.source = ChangeSource("cli")
    store.write("project:api/auth.md", "JWT\n")
    code, out, err = run("log")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) == 3
    assert "  create  project:api/auth.md: new note, 4 bytes; by cli" in lines[0]
    assert lines[1].startswith("chg_") and "  update  global:prefs.md: +1 -0 lines; by " \
        f'memory_run (session {RUN.session_id}, task bg_3): "remember that I use uv"' in lines[1]
    assert "  create  global:prefs.md: new note, 5 bytes" in lines[2]
    # The time, UTC to the second, between the id and the action.
    assert lines[2].split("  ")[1][:2] == "20" and lines[2].split("  ")[1][10] == " "


def test_notes_log_of_a_path_keeps_its_changes_those_under_it_and_its_folders(
    run: Run, store: MemoryStore
) -> None:
    store.write("global:infra/deploy.md", "monthly\n")
    store.write("global:infra/dns.md", "bind\n")
    store.write("global:other.md", "other\n")
    store.delete("global:infra")

    def paths(*argv: str) -> list[tuple[str, str]]:
        code, out, _ = run("log", *argv, "--json")
        assert code == 0
        return [(c["action"], c["path"]) for c in json.loads(out)]

    assert paths("global:infra/deploy.md") == [("rmdir", "infra"), ("create", "infra/deploy.md")]
    assert paths("global:infra") == [("rmdir", "infra"), ("create", "infra/dns.md"),
                                     ("create", "infra/deploy.md")]
    assert paths("project:") == []
    assert "  rmdir  global:infra/: deleted folder with 2 notes; by " in run(
        "log", "global:infra")[1].splitlines()[0]
    assert run("log", "project:")[1] == "no changes of project: in the memory history\n"
    code, _, err = run("log", "global:../x.md")
    assert code == 1 and "'..'" in err and len(err.splitlines()) == 1


def test_notes_log_json_prints_the_pinned_objects(run: Run, store: MemoryStore) -> None:
    store.write("global:prefs.md", "tabs\n")
    store.write("project:auth.md", "JWT\n")
    code, out, _ = run("log", "--json")
    assert code == 0
    project, global_ = json.loads(out)
    assert set(project) == set(global_) == CHANGE_KEYS
    assert (project["root"], project["path"], global_["root"]) == ("project", "auth.md", "global")
    assert global_["source"] == {"surface": "memory_run", "sessionId": RUN.session_id,
                                 "taskId": "bg_3", "message": "remember that I use uv"}
    assert set(project["source"]) == SOURCE_KEYS
    assert global_["summary"] == "new note, 5 bytes" and global_["action"] == "create"
    assert global_["id"].startswith("chg_") and len(global_["id"]) == 16
    assert run("undo", global_["id"], "-y")[0] == 0
    undone = json.loads(run("log", "--json", "--limit", "1")[1])[0]
    assert set(undone) == CHANGE_KEYS | {"undoes"} and undone["undoes"] == global_["id"]


def test_notes_log_shows_20_changes_unless_told_and_0_means_all(
    run: Run, store: MemoryStore
) -> None:
    for i in range(23):
        store.write("global:count.md", f"{i}\n")
    assert len(run("log")[1].splitlines()) == 20
    assert len(run("log", "--limit", "3")[1].splitlines()) == 3
    assert len(json.loads(run("log", "--limit", "0", "--json")[1])) == 23
    assert run("log", "--limit", "-1") == (2, "", "acp-memory notes: --limit must be 0 (all) "
                                                   "or more\n")
    notes = build_parser()._subparsers._group_actions[0].choices["notes"]  # type: ignore[union-attr]
    log = notes._subparsers._group_actions[0].choices["log"]
    assert "default 20" in " ".join(log.format_help().split())


def test_notes_log_cost_sums_what_each_memory_run_recorded_per_day(
    run: Run, tmp_path: Path
) -> None:
    days = iter([datetime(2026, 11, 30, 9, tzinfo=UTC), datetime(2026, 12, 1, 9, tzinfo=UTC),
                 datetime(2026, 12, 1, 18, tzinfo=UTC)])
    moment = [next(days)]
    journal = Journal(tmp_path / "h" / "history" / "journal.sqlite3", keep_days=0,
                      now=lambda: moment[0])
    cost = {"modelCalls": 2, "inputTokens": 1000, "outputTokens": 50, "cachedReadTokens": 800,
            "cachedWriteTokens": 10, "durationMs": 1500}
    journal.record_run("sess_a", "bg_1", cost)
    for task in ("bg_2", "bg_3"):
        moment[0] = next(days)
        journal.record_run("sess_b", task, {k: v * 2 for k, v in cost.items()})
    journal.close()
    code, out, _ = run("log", "--cost", "--json")
    assert code == 0 and json.loads(out) == [
        {"day": "2026-12-01", "runs": 2, "modelCalls": 8, "inputTokens": 4000,
         "outputTokens": 200, "cachedReadTokens": 3200, "cachedWriteTokens": 40,
         "durationMs": 6000},
        {"day": "2026-11-30", "runs": 1, **cost},
    ]
    code, out, _ = run("log", "--cost")
    assert out.splitlines() == [
        "2026-12-01: 2 memory runs, 8 model calls, 4000 tokens in, 200 out, 3200 cached read, "
        "40 cached write, 6.0s",
        "2026-11-30: 1 memory run, 2 model calls, 1000 tokens in, 50 out, 800 cached read, "
        "10 cached write, 1.5s",
    ]
    assert run("log", "--cost", "--limit", "1", "--json")[1].count('"day"') == 1
    assert run("log", "--cost", "global:x.md")[0] == 2


_CRASHING_WRITER = """
import sys
from acp_memory.config import Config, resolve_paths
from acp_memory.memory.store import MemoryStore
store = MemoryStore.from_config(Config(), resolve_paths(home=sys.argv[1], cwd=sys.argv[2]))
store.write("global:x.md", "written, then the process died\\n")
"""


def test_notes_log_settles_a_dead_writers_change_before_reading(
    run: Run, tmp_path: Path
) -> None:
    (tmp_path / "w").mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", _CRASHING_WRITER, str(tmp_path / "h"), str(tmp_path / "w")],
        env={**os.environ, "ACP_MEMORY_TEST_CRASH": "after_note"}, capture_output=True,
        text=True, timeout=60,
    )
    assert done.returncode == 3, done.stderr
    code, out, _ = run("log", "--json")
    assert code == 0
    assert [(c["action"], c["path"]) for c in json.loads(out)] == [("create", "x.md")]
    assert run("undo", json.loads(out)[0]["id"], "-y")[0] == 0
    assert not (tmp_path / "h" / "memory" / "x.md").exists()


# -- held changes --------------------------------------------------------------------------


def hold(store: MemoryStore, path: str, text: str | None) -> str:
    loc = store.locate(path)
    loc.root.mkdir(parents=True, exist_ok=True)
    assert store.journal is not None
    now = Captured.note(loc.path.read_bytes()) if loc.path.exists() else Captured(None)
    after = Captured(None) if text is None else Captured.note(text.encode())
    action = "delete" if text is None else ("update" if now.state else "create")
    return store.journal.hold((loc.scope, loc.root, loc.rel), action, now, after, RUN).id


def test_notes_pending_lists_the_held_changes_and_json_gives_their_objects(
    run: Run, store: MemoryStore
) -> None:
    assert run("pending") == (0, "no changes are waiting for approval\n", "")
    first = hold(store, "global:prefs.md", "tabs\n")
    hold(store, "project:auth.md", "JWT\n")
    code, out, _ = run("pending")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith(f"{first}  ")
    assert "  create  global:prefs.md: new note, 5 bytes; by memory_run" in lines[0]
    assert "project:auth.md" in lines[1] and "notes approve ID|all" in lines[2]
    held = json.loads(run("pending", "--json")[1])
    assert [set(h) for h in held] == [CHANGE_KEYS, CHANGE_KEYS]
    assert [(h["root"], h["path"], h["action"]) for h in held] == [
        ("global", "prefs.md", "create"), ("project", "auth.md", "create")]
    assert held[0]["id"] == first and held[0]["source"]["taskId"] == "bg_3"


def test_notes_approve_writes_a_held_change_and_reject_drops_it(
    run: Run, store: MemoryStore, tmp_path: Path
) -> None:
    root = tmp_path / "h" / "memory"
    kept = hold(store, "global:prefs.md", "tabs\n")
    dropped = hold(store, "global:other.md", "never\n")
    assert run("approve", kept) == (0, f"approved {kept}: create global:prefs.md\n", "")
    assert (root / "prefs.md").read_text() == "tabs\n"
    assert run("reject", dropped) == (0, f"rejected {dropped}: create global:other.md\n", "")
    assert not (root / "other.md").exists()
    assert json.loads(run("pending", "--json")[1]) == []
    # The approved change is in the history, from the run that proposed it.
    change = json.loads(run("log", "--json")[1])[0]
    assert (change["path"], change["source"]["taskId"]) == ("prefs.md", "bg_3")
    code, out, err = run("approve", kept)
    assert (code, out) == (1, "") and f"no pending change {kept!r}" in err


def test_notes_approve_over_a_note_changed_since_is_refused_in_one_line(
    run: Run, store: MemoryStore, tmp_path: Path
) -> None:
    note = tmp_path / "h" / "memory" / "prefs.md"
    held = hold(store, "global:prefs.md", "tabs\n")
    note.write_text("written by hand meanwhile\n")
    code, out, err = run("approve", held)
    assert (code, out) == (1, "")
    assert err == (f"acp-memory notes: global:prefs.md changed since {held} was held; nothing "
                   "was written (reject it, or ask again)\n")
    assert note.read_text() == "written by hand meanwhile\n"


def test_notes_approve_all_and_reject_all_take_every_held_change(
    run: Run, store: MemoryStore, tmp_path: Path
) -> None:
    root = tmp_path / "h" / "memory"
    first = hold(store, "global:a.md", "a\n")
    blocked = hold(store, "global:b.md", "b\n")
    (root / "b.md").write_text("already here\n")
    code, out, err = run("approve", "all")
    assert code == 1 and out == f"approved {first}: create global:a.md\n"
    assert err.startswith(f"acp-memory notes: global:b.md changed since {blocked}")
    assert run("reject", "all") == (0, f"rejected {blocked}: create global:b.md\n", "")
    assert run("approve", "all") == (0, "no changes are waiting for approval\n", "")
    assert (root / "a.md").read_text() == "a\n" and (root / "b.md").read_text() == "already here\n"


def test_notes_log_reading_a_settled_history_creates_no_root(run: Run, tmp_path: Path) -> None:
    code, out, _ = run("log")
    assert (code, out) == (0, "no changes of global or project in the memory history\n")
    # Only a root with a dead writer's intent is locked (which makes a missing root).
    assert not (tmp_path / "h" / "memory").exists() and not (tmp_path / "w" / "memory").exists()
