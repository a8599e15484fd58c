"""The journal of note changes: every change recorded with its source, undone byte for byte,
refused over a later change or a hand edit, atomic with the write across a crash, pruned."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from acp_memory.memory.history.journal import Journal, JournalError
from acp_memory.memory.history.purge import purge
from acp_memory.memory.history.records import ChangeSource, change_message
from acp_memory.memory.history.states import Captured, digest, folder
from acp_memory.memory.history.summary import undone_line
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


def test_a_save_in_a_folder_and_the_folders_delete_are_undone_together(
    store: MemoryStore, journal: Journal
) -> None:
    root = store.roots.global_root
    store.write("global:f/old.md", "old\n")
    store.write("global:f/x.md", "one\n")
    store.delete("global:f")
    undo_changes(store, journal.changes([root], limit=2))  # the delete, then the save
    assert (root / "f" / "old.md").read_text() == "old\n" and not (root / "f" / "x.md").exists()


def test_a_hand_edit_under_a_folder_deleted_later_refuses_the_set_and_undoes_none(
    store: MemoryStore, journal: Journal
) -> None:
    root = store.roots.global_root
    store.write("global:f/x.md", "one\n")
    (root / "f" / "x.md").write_text("edited by hand\n")
    store.delete("global:f")
    with pytest.raises(ChangedSince, match=r"global:f/x\.md changed since \(chg_\w+\): edited "
                                           "outside acp-memory"):
        undo_changes(store, journal.changes([root], limit=2))
    assert not (root / "f").exists()  # the folder's delete, checked first, was not undone
    assert [c.action for c in journal.changes([root])] == ["rmdir", "create"]


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


# -- what the history stores: redacted, purged, checked, durable -----------------------------

SECRET = "hunter2hunter2"


def test_a_deleted_notes_secret_is_stored_redacted_and_its_undo_says_so(
    store: MemoryStore, journal: Journal
) -> None:
    note = store.roots.global_root / "x.md"
    note.parent.mkdir(parents=True)
    note.write_bytes(f"Deploy notes\r\npassword: {SECRET}\n".encode())  # written by hand
    store.delete("global:x.md")
    (delete,) = journal.changes([store.roots.global_root])
    assert SECRET.encode() not in journal.blob(delete.before.removeprefix("note:"))  # type: ignore[union-attr]
    undone = undo(store, delete.id)
    assert note.read_bytes() == b"Deploy notes\r\npassword: [REDACTED:password]\n"
    assert undone.redacted == 1
    assert undone_line(undone) == (f"undid {delete.id}: global:x.md restored with 1 secret(s) "
                                   f"redacted; the undo is {undone.undo_id}")
    # What the undo wrote is what it recorded: undoing it is not taken for a hand edit.
    again = undo(store, last(store))
    assert not note.exists() and again.redacted == 0


def test_what_the_store_wrote_redacted_is_stored_without_redacting_it_again(
    store: MemoryStore, journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acp_memory.memory.history import journal as journal_module

    redacted: list[bytes] = []
    redact_bytes = journal_module.redact_bytes

    def observed(data: bytes) -> tuple[bytes, int]:
        redacted.append(data)
        return redact_bytes(data)

    monkeypatch.setattr(journal_module, "redact_bytes", observed)
    note = store.roots.global_root / "x.md"
    store.write("global:x.md", f"password: {SECRET}\n")
    note.write_text(f"by hand, token: {SECRET}\n")
    store.write("global:x.md", "a new text\n")
    undo(store, last(store))  # puts back the stored (redacted) hand edit
    # Only the hand edit, which no one redacted before, is redacted by the journal.
    assert redacted == [f"by hand, token: {SECRET}\n".encode()]
    assert note.read_text() == "by hand, token: [REDACTED:token]\n"
    with contextlib.closing(sqlite3.connect(journal.db_path)) as db:
        # The first text, the hand edit (one secret lost), the new text, the undo's.
        assert [n for (n,) in db.execute("SELECT redacted FROM blobs ORDER BY rowid")] == [
            0, 1, 0, 0]


def test_a_folder_delete_stores_each_file_redacted_and_brings_the_rest_back_byte_for_byte(
    store: MemoryStore, journal: Journal
) -> None:
    infra = store.roots.global_root / "infra"
    (infra / ".hidden").mkdir(parents=True)
    (infra / "keys.md").write_text(f"token: ghp_{'a1' * 18}\npassword: {SECRET}\n")
    (infra / "latin.md").write_bytes(b"caf\xe9\r\nno newline")
    (infra / ".hidden" / "logo.png").write_bytes(b"\x89PNG\x00\xff")
    store.delete("global:infra")
    with sqlite3.connect(journal.db_path) as db:
        assert not [h for (h,) in db.execute("SELECT hash FROM blobs WHERE instr(data, ?)",
                                             (SECRET.encode(),))]
    undone = undo(store, last(store))
    assert (infra / "keys.md").read_text() == (
        "token: [REDACTED:github_token]\npassword: [REDACTED:password]\n")
    assert (infra / "latin.md").read_bytes() == b"caf\xe9\r\nno newline"
    assert (infra / ".hidden" / "logo.png").read_bytes() == b"\x89PNG\x00\xff"
    assert undone.redacted == 2 and "restored with 2 secret(s) redacted" in undone_line(
        undone)
    undo(store, last(store))  # what it recorded is what it wrote, hidden file included
    assert not infra.exists()


_EARLIER_SCHEMA = """
CREATE TABLE blobs(hash TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE changes(
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, time TEXT NOT NULL,
    scope TEXT NOT NULL, root TEXT NOT NULL, path TEXT NOT NULL, action TEXT NOT NULL,
    before TEXT, after TEXT, surface TEXT NOT NULL, session_id TEXT, task_id TEXT,
    message TEXT, undoes TEXT, done INTEGER NOT NULL DEFAULT 0);
"""


def test_a_journal_of_an_earlier_version_is_redacted_once_when_opened(
    roots: Roots, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_path = tmp_path / "home" / "history" / "journal.sqlite3"
    db_path.parent.mkdir(parents=True)
    raw = f"password: {SECRET}\n".encode()
    kept = Captured.note(raw)
    infra = folder([], {"db.md": digest(raw)}, {}, {})
    manifest_hash = infra.state.removeprefix("dir:")  # type: ignore[union-attr]
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        db.executescript(_EARLIER_SCHEMA)
        db.executemany("INSERT INTO blobs VALUES (?, ?)",
                       [(digest(raw), raw), (manifest_hash, infra.blobs[manifest_hash])])
        for n, (path, action, before) in enumerate([("x.md", "delete", kept.state),
                                                     ("infra", "rmdir", infra.state)]):
            db.execute("INSERT INTO changes(id, time, scope, root, path, action, before, "
                       "surface, done) VALUES (?, '2026-12-01T12:00:00Z', 'global', ?, ?, ?, "
                       "?, 'cli', 1)", (f"chg_00000000000{n}", str(roots.global_root), path,
                                        action, before))
    journal = Journal(db_path, keep_days=0)
    with MemoryStore(roots, tmp_path / "cache", journal=journal) as store:
        assert journal.blob(digest(raw)) == b"password: [REDACTED:password]\n"
        assert journal.blob(manifest_hash) == infra.blobs[manifest_hash]  # names and hashes
        assert undo(store, "chg_000000000001").redacted == 1
        assert (roots.global_root / "infra" / "db.md").read_bytes() == (
            b"password: [REDACTED:password]\n")
        journal.close()
        from acp_memory.memory.history import journal as journal_module

        def again(data: bytes) -> tuple[bytes, int]:
            raise AssertionError("an upgraded journal was redacted again")

        monkeypatch.setattr(journal_module, "redact_bytes", again)
        assert len(journal.changes([roots.global_root])) == 3


def test_a_purge_drops_the_path_from_the_folder_records_holding_it(
    store: MemoryStore, journal: Journal
) -> None:
    infra = store.roots.global_root / "infra"
    infra.mkdir(parents=True)
    (infra / "keys.md").write_text("the old key\n")
    (infra / "db.md").write_text("postgres\n")
    store.write("global:infra/keys.md", "rotated\n")
    store.delete("global:infra")
    rmdir = last(store)
    keys = journal.manifest_of(journal.change(rmdir).before)["files"]["keys.md"]  # type: ignore[arg-type, union-attr]
    count, purge_id = purge(journal, ("global", store.roots.global_root, "infra/keys.md"), RUN)
    assert count == 2 and purge_id is not None
    with pytest.raises(JournalError, match="lacks content"):
        journal.blob(keys)
    assert [c.action for c in journal.changes([store.roots.global_root], "infra/keys.md")] == [
        "purge", "rmdir"]
    undo(store, rmdir)  # the purge is no later change of the folder
    assert sorted(p.name for p in infra.iterdir()) == ["db.md"]


@pytest.mark.parametrize(("files", "links"), [
    ({"../../x.md": "HASH"}, {}),
    ({"ABSOLUTE": "HASH"}, {}),
    ({}, {"escape.md": "../../x.md"}),
    ({}, {"abs.md": "/etc/passwd"}),
    ({}, {"deep/up": "../../../x.md"}),
])
def test_a_tampered_folder_record_writes_nothing_outside_the_root_even_forced(
    store: MemoryStore, journal: Journal, tmp_path: Path, files: dict[str, str],
    links: dict[str, str]
) -> None:
    store.write("global:infra/db.md", "postgres\n")
    store.delete("global:infra")
    rmdir = last(store)
    body = Captured.note(b"planted\n")
    (h,) = body.blobs
    files = {str(tmp_path / "x.md") if k == "ABSOLUTE" else k: h for k in files}
    tampered = folder(["deep"], files, links, body.blobs)
    with sqlite3.connect(journal.db_path) as db:
        db.executemany("INSERT OR IGNORE INTO blobs(hash, data) VALUES (?, ?)",
                       list(tampered.blobs.items()))
        db.execute("UPDATE changes SET before = ? WHERE id = ?", (tampered.state, rmdir))
    with pytest.raises(NoteError, match=r"^cannot undo global:infra: .*outside the root; "
                                        "nothing was restored$"):
        undo(store, rmdir, force=True)
    assert not (store.roots.global_root / "infra").exists()
    assert not list(tmp_path.rglob("x.md")) and last(store) == rmdir


def test_the_intent_is_committed_durably_before_the_notes_rename(
    store: MemoryStore, journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acp_memory.memory import store as store_module

    seen: list[tuple[list[tuple[str, int]], int]] = []
    rename = store_module.write_atomic

    def observed(path: Path, data: bytes) -> None:
        # Another reader sees the intent, and the connection that wrote it syncs each commit.
        with contextlib.closing(sqlite3.connect(journal.db_path)) as other:
            intents = other.execute("SELECT path, done FROM changes").fetchall()
        with journal.use() as live:
            seen.append((intents, live.execute("PRAGMA synchronous").fetchone()[0]))
        rename(path, data)

    monkeypatch.setattr(store_module, "write_atomic", observed)
    store.write("global:x.md", "one\n")
    assert seen == [([("x.md", 0)], 2)]  # 2: FULL


def test_the_done_mark_is_committed_without_a_sync_of_its_own(
    store: MemoryStore, journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acp_memory.memory.history import journal as journal_module

    levels: list[int] = []
    complete = journal_module._complete

    def observed(db: sqlite3.Connection, change_id: str) -> None:
        levels.append(db.execute("PRAGMA synchronous").fetchone()[0])
        complete(db, change_id)

    monkeypatch.setattr(journal_module, "_complete", observed)
    store.write("global:x.md", "one\n")
    assert levels == [1]  # 1: NORMAL, in WAL not synced at commit
    with journal.use() as live:  # the connection's next commits are synced again
        assert live.execute("PRAGMA synchronous").fetchone()[0] == 2
    assert [c.action for c in journal.changes([store.roots.global_root])] == ["create"]


def test_a_change_whose_done_mark_a_power_cut_lost_settles_as_made_and_undoes(
    store: MemoryStore, journal: Journal
) -> None:
    store.write("global:x.md", "before\n")
    store.write("global:x.md", "after\n")
    update = last(store)
    # What a power cut may leave: the intent and the rename on disk, the done mark not.
    with contextlib.closing(sqlite3.connect(journal.db_path)) as other, other:
        other.execute("UPDATE changes SET done = 0 WHERE id = ?", (update,))
    assert [c.action for c in journal.changes([store.roots.global_root])] == ["create"]
    store.settle()
    changes = journal.changes([store.roots.global_root], "x.md")
    assert [(c.id, c.action) for c in changes] == [(update, "update"), (changes[1].id, "create")]
    undo(store, update)
    assert (store.roots.global_root / "x.md").read_text() == "before\n"


def test_a_changes_message_is_its_first_line_redacted_and_cut_at_200_characters() -> None:
    token = f"ghp_{'a1' * 18}"
    message = change_message(f"\n   my token {token} and then {'words ' * 60}\nsecond line")
    assert message.startswith("my token [REDACTED:github_token] and then words")
    assert len(message) == 200 and token not in message and "second" not in message


_DYING = """
import sys
from pathlib import Path
from acp_memory.memory.history.journal import Journal
from acp_memory.memory.history.pending import approve
from acp_memory.memory.history.undo import undo
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore
base = Path(sys.argv[1])
journal = Journal(base / "history" / "journal.sqlite3")
store = MemoryStore(Roots(base / "memory"), base / "cache", journal=journal)
{"undo": undo, "approve": approve}[sys.argv[2]](store, sys.argv[3])
print("not reached")
"""


def _dies_at(point: str, tmp_path: Path, action: str, change_id: str) -> None:
    """Run undo or approve of change_id in a process that the crash hook ends at point."""
    done = subprocess.run(
        [sys.executable, "-c", _DYING, str(tmp_path), action, change_id],
        env={**os.environ, "ACP_MEMORY_TEST_CRASH": point}, capture_output=True,
        text=True, timeout=60,
    )
    assert (done.returncode, done.stdout) == (3, ""), done.stderr


def test_a_crash_in_the_middle_of_a_folder_restore_leaves_no_half_folder(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path / "history" / "journal.sqlite3")
    roots = Roots(tmp_path / "memory")
    infra = roots.global_root / "infra"
    with MemoryStore(roots, tmp_path / "cache", journal=journal) as store:
        for name in ("a.md", "b.md", "c.md"):
            store.write(f"global:infra/{name}", f"{name}\n")
        store.delete("global:infra")
        rmdir = last(store)
        _dies_at("mid_restore", tmp_path, "undo", rmdir)
        assert not infra.exists()  # one file was written, aside
        store.write("global:y.md", "the next writer settles the intent\n")
        assert journal.changes([roots.global_root], "infra")[0].action == "rmdir"
        undo(store, rmdir)
        assert sorted(p.name for p in infra.iterdir()) == ["a.md", "b.md", "c.md"]
        assert sorted(p.name for p in roots.global_root.iterdir()) == ["infra", "y.md"]
    journal.close()


@pytest.mark.parametrize(("point", "written"), [("after_journal", False), ("after_note", True)])
def test_a_crash_in_the_middle_of_an_approve_leaves_the_change_held_or_made_never_both(
    tmp_path: Path, point: str, written: bool
) -> None:
    journal = Journal(tmp_path / "history" / "journal.sqlite3")
    roots = Roots(tmp_path / "memory")
    note = roots.global_root / "x.md"
    with MemoryStore(roots, tmp_path / "cache", journal=journal) as store:
        roots.global_root.mkdir(parents=True)
        held = journal.hold(("global", roots.global_root, "x.md"), "create", Captured(None),
                            Captured.note(b"approved\n"), RUN)
        _dies_at(point, tmp_path, "approve", held.id)
        assert note.exists() is written
        store.settle()
        made = [c.action for c in journal.changes([roots.global_root])]
        assert (made, [h.id for h in journal.held()]) == (
            (["create"], []) if written else ([], [held.id]))
    journal.close()
