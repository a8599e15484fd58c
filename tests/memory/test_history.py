"""The journal of note changes: every change recorded with its source, undone byte for byte,
refused over a later change or a hand edit, atomic with the write across a crash, pruned."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from acp_memory.memory.history.journal import ChangeSource, Journal
from acp_memory.memory.history.states import Captured
from acp_memory.memory.history.undo import ChangedSince, UnknownChange, undo, undo_changes
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore, NoteError

RUN = ChangeSource("memory_run", "sess_" + "a" * 24, "bg_3", "remember that I use uv")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def journal(tmp_path: Path, clock: Clock) -> Iterator[Journal]:
    journal = Journal(tmp_path / "home" / "history" / "journal.sqlite3", now=clock)
    yield journal
    journal.close()


@pytest.fixture
def store(roots: Roots, tmp_path: Path, journal: Journal) -> Iterator[MemoryStore]:
    with MemoryStore(roots, tmp_path / "home" / "cache", journal=journal, source=RUN) as store:
        yield store


def last(store: MemoryStore) -> str:
    assert store.journal is not None
    return store.journal.changes([store.roots.global_root], limit=1)[0].id


def test_every_change_is_journaled_with_its_source_action_and_contents(
    store: MemoryStore, journal: Journal
) -> None:
    store.save("Tools", "I use uv.\n", "global")
    store.write("global:tools.md", "I use uv and ruff.\n")
    store.mkdir("global:infra")
    store.save("Deploy", "Deploy on Fridays.\n", "global", "infra")
    store.delete("global:infra")
    store.delete("global:tools.md")
    changes = journal.changes([store.roots.global_root])
    assert [(c.action, c.path) for c in changes] == [
        ("delete", "tools.md"), ("rmdir", "infra"), ("create", "infra/deploy.md"),
        ("mkdir", "infra"), ("update", "tools.md"), ("create", "tools.md"),
    ]
    assert {c.source for c in changes} == {RUN}
    assert all(c.id.startswith("chg_") and len(c.id) == 16 for c in changes)
    created = changes[-1]
    assert created.before is None
    assert journal.blob(created.after.removeprefix("note:")) == b"I use uv.\n"  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["create", "update", "delete", "rmdir"])
def test_undo_restores_the_bytes_before_the_change(store: MemoryStore, kind: str) -> None:
    root = store.roots.global_root
    body = "Prefers tabs.\r\nNo trailing newline ✓"
    store.write("global:a/prefs.md", body)
    (root / "a" / "image.png").write_bytes(b"\x89PNG\x00")  # not a note, kept by the delete too
    store.write("global:a/b/deep.md", "deep\n")
    before = {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    if kind == "create":
        store.write("global:new.md", "brand new\n")
    elif kind == "update":
        store.write("global:a/prefs.md", "Prefers spaces.\n")
    elif kind == "delete":
        store.delete("global:a/prefs.md")
    else:
        store.delete("global:a")
    undone = undo(store, last(store))
    after = {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert after == before
    assert undone.change.action == kind


def test_an_undo_is_itself_a_change_that_can_be_undone(store: MemoryStore) -> None:
    store.write("global:x.md", "one\n")
    store.write("global:x.md", "two\n")
    first = last(store)
    undo(store, first)
    assert store.read("global:x.md")[1] == "one\n"
    assert store.journal is not None
    redo = store.journal.changes([store.roots.global_root], limit=1)[0]
    assert (redo.action, redo.undoes) == ("undo", first)
    undo(store, redo.id)
    assert store.read("global:x.md")[1] == "two\n"


def test_undo_is_refused_after_a_later_change_naming_it_unless_forced(
    store: MemoryStore,
) -> None:
    store.write("global:x.md", "one\n")
    store.write("global:x.md", "two\n")
    first_update = last(store)
    store.write("global:x.md", "three\n")
    later = last(store)
    with pytest.raises(ChangedSince, match=later):
        undo(store, first_update)
    assert store.read("global:x.md")[1] == "three\n"
    undo(store, first_update, force=True)
    assert store.read("global:x.md")[1] == "one\n"


def test_changes_of_one_path_undone_in_one_step_are_not_refused_over_each_other(
    store: MemoryStore, journal: Journal
) -> None:
    store.write("global:keep.md", "kept\n")
    store.write("global:x.md", "one\n")
    store.write("global:x.md", "two\n")
    run = journal.changes([store.roots.global_root], "x.md")  # the update, then the create
    done = undo_changes(store, run)
    assert [d.change.id for d in done] == [c.id for c in run]
    assert not (store.roots.global_root / "x.md").exists()
    assert [(c.action, c.undoes) for c in journal.changes([store.roots.global_root], "x.md")][
        :2] == [("undo", run[1].id), ("undo", run[0].id)]


def test_undo_of_a_folder_delete_brings_back_its_links_as_links(store: MemoryStore) -> None:
    infra = store.roots.global_root / "infra"
    (infra / "real").mkdir(parents=True)
    (infra / "real" / "db.md").write_text("postgres\n")
    (infra / "linked").symlink_to("real")
    (infra / "db-link.md").symlink_to("real/db.md")
    store.delete("global:infra")
    undo(store, last(store))
    assert os.readlink(infra / "linked") == "real" and os.readlink(infra / "db-link.md") == (
        "real/db.md")
    assert (infra / "real" / "db.md").read_text() == "postgres\n"


def test_the_history_of_a_path_with_like_wildcards_is_of_that_path_only(
    store: MemoryStore, journal: Journal
) -> None:
    store.write("global:a_b/x.md", "one\n")
    store.write("global:axb/y.md", "two\n")
    store.write("global:a%/z.md", "three\n")
    root = store.roots.global_root
    assert [c.path for c in journal.changes([root], "a_b")] == ["a_b/x.md"]
    assert [c.path for c in journal.changes([root], "a%")] == ["a%/z.md"]


def test_a_folder_deleted_after_a_save_blocks_undoing_the_save(store: MemoryStore) -> None:
    store.write("global:f/x.md", "one\n")
    save = last(store)
    store.delete("global:f")
    with pytest.raises(ChangedSince, match=last(store)):
        undo(store, save)


def test_undo_is_refused_over_a_hand_edit(store: MemoryStore) -> None:
    store.write("global:x.md", "one\n")
    change = last(store)
    (store.roots.global_root / "x.md").write_text("edited in vim\n")
    with pytest.raises(ChangedSince, match="edited outside acp-memory"):
        undo(store, change)
    assert store.read("global:x.md")[1] == "edited in vim\n"


def test_undo_of_an_unknown_change_says_so(store: MemoryStore) -> None:
    with pytest.raises(UnknownChange, match="chg_000000000000"):
        undo(store, "chg_000000000000")


def test_a_journal_that_cannot_be_written_refuses_the_change(
    roots: Roots, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir(parents=True)
    (home / "history").write_text("a file where the folder goes")
    journal = Journal(home / "history" / "journal.sqlite3")
    with MemoryStore(roots, home / "cache", journal=journal) as store, pytest.raises(
        NoteError, match=r"cannot record the change of global:x\.md in the memory history"
    ):
        store.write("global:x.md", "one\n")
    assert not (roots.global_root / "x.md").exists()


def test_changes_past_history_days_are_pruned_with_their_contents(
    store: MemoryStore, journal: Journal, clock: Clock
) -> None:
    store.write("global:old.md", "old fact\n")
    old_hash = journal.changes([store.roots.global_root])[0].after
    clock.now += timedelta(days=91)
    store.write("global:new.md", "new fact\n")
    journal.close()  # the next open prunes
    assert [c.path for c in journal.changes([store.roots.global_root])] == ["new.md"]
    with pytest.raises(Exception, match="lacks content"):
        journal.blob(old_hash.removeprefix("note:"))  # type: ignore[union-attr]


def test_a_prune_keeps_the_notes_a_deleted_folder_still_in_the_history_held(
    store: MemoryStore, journal: Journal, clock: Clock
) -> None:
    store.write("global:old.md", "old fact\n")
    clock.now += timedelta(days=91)
    (store.roots.global_root / "infra").mkdir()
    (store.roots.global_root / "infra" / "db.md").write_text("written by hand\n")
    store.delete("global:infra")
    journal.close()  # the next open prunes old.md's change and sweeps the blobs
    (rmdir,) = journal.changes([store.roots.global_root])
    undo(store, rmdir.id)
    assert (store.roots.global_root / "infra" / "db.md").read_text() == "written by hand\n"


def test_opening_a_journal_with_nothing_past_its_days_reads_no_manifest(
    store: MemoryStore, journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.mkdir("global:infra")
    store.write("global:infra/db.md", "postgres\n")
    store.delete("global:infra")
    journal.close()

    def swept(self: Journal, db: object) -> set[str]:
        raise AssertionError("the blobs were swept with nothing pruned")

    monkeypatch.setattr(Journal, "_used_blobs", swept)
    assert [c.action for c in journal.changes([store.roots.global_root])] == [
        "rmdir", "create", "mkdir"]


def test_history_days_zero_keeps_every_change(tmp_path: Path, roots: Roots, clock: Clock) -> None:
    journal = Journal(tmp_path / "j.sqlite3", keep_days=0, now=clock)
    with MemoryStore(roots, tmp_path / "cache", journal=journal) as store:
        store.write("global:old.md", "old fact\n")
        clock.now += timedelta(days=4000)
        journal.close()
        assert [c.path for c in journal.changes([roots.global_root])] == ["old.md"]
    journal.close()


def test_an_unchanged_write_records_nothing(store: MemoryStore, journal: Journal) -> None:
    store.write("global:x.md", "same\n")
    store.write("global:x.md", "same\n")
    assert len(journal.changes([store.roots.global_root])) == 1


def test_a_failed_write_leaves_no_change_behind(
    store: MemoryStore, journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acp_memory.memory import store as store_module

    def refused(path: Path, data: bytes) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(store_module, "write_atomic", refused)
    with pytest.raises(NoteError):
        store.write("global:x.md", "one\n")
    assert journal.changes([store.roots.global_root]) == []
    # Settled at once, not left as an intent for the next writer.
    assert journal.recover(store.roots.global_root, lambda rel: Captured(None)) == 0


_CRASHING_WRITER = """
import sys
from pathlib import Path
from acp_memory.memory.history.journal import Journal
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore
base = Path(sys.argv[1])
journal = Journal(base / "history" / "journal.sqlite3")
store = MemoryStore(Roots(base / "memory"), base / "cache", journal=journal)
store.write("global:x.md", "after\\n")
print("not reached")
"""


@pytest.mark.parametrize(("point", "expected"), [("after_journal", "before\n"),
                                                 ("after_note", "after\n")])
def test_a_crash_between_the_write_and_the_journal_leaves_a_consistent_pair(
    tmp_path: Path, point: str, expected: str
) -> None:
    journal = Journal(tmp_path / "history" / "journal.sqlite3")
    roots = Roots(tmp_path / "memory")
    with MemoryStore(roots, tmp_path / "cache", journal=journal) as store:
        store.write("global:x.md", "before\n")
        done = subprocess.run(
            [sys.executable, "-c", _CRASHING_WRITER, str(tmp_path)],
            env={**os.environ, "ACP_MEMORY_TEST_CRASH": point}, capture_output=True, text=True,
            timeout=60,
        )
        assert (done.returncode, done.stdout) == (3, ""), done.stderr
        assert (roots.global_root / "x.md").read_text() == expected
        store.write("global:y.md", "the next writer settles the intent\n")
        changes = journal.changes([roots.global_root], "x.md")
        if point == "after_note":  # the note holds the intent's after: completed
            assert [c.action for c in changes] == ["update", "create"]
            undo(store, changes[0].id)
            assert (roots.global_root / "x.md").read_text() == "before\n"
        else:  # the note holds its before: nothing happened
            assert [c.action for c in changes] == ["create"]
    journal.close()


def test_recovery_drops_an_intent_whose_path_is_as_it_was(
    store: MemoryStore, journal: Journal
) -> None:
    loc = store.locate("global:x.md")
    recording = journal.recording(("global", loc.root, "x.md"), "create", Captured(None),
                                  Captured.note(b"never written"), RUN,
                                  current=lambda: Captured(None))
    recording.__enter__()  # a writer that died before its rename: no exit ever comes
    assert journal.recover(loc.root, lambda rel: Captured(None)) == 1
    assert journal.changes([loc.root]) == []
