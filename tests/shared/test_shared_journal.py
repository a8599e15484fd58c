"""The shared project root's history on PostgreSQL (`SharedJournal`): a change's rows and its
record commit together in seq order, a stale before or a failed body or commit writes nothing
(and leaves the local copy as the server holds it), and the history reads, held changes, purge
and prune follow the disk journal's rules for the whole team's project."""

from __future__ import annotations

import errno
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from acp_memory.atomic import write_atomic
from acp_memory.memory.history.journal import JournalError
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.history.states import (
    EMPTY_FOLDER,
    Captured,
    apply,
    capture,
    remove,
    restoring,
)
from acp_memory.memory.history.summary import source_text
from acp_memory.memory.rootlock import root_lock
from acp_memory.memory.shared.copy import LocalCopy
from acp_memory.memory.shared.database import Database, SharedUnavailable
from acp_memory.memory.shared.journal import SharedConflict, SharedJournal
from acp_memory.memory.shared.schema import SCHEMA

KEY = "github.com/team/repo"
RUN = ChangeSource("memory_run", "sess_" + "a" * 24, "bg_3", "remember that I use uv")
CLI = ChangeSource("cli")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class Team:
    """Members of one team (a home each, so a local copy each) on one database."""

    def __init__(self, tmp_path: Path, dsn: str) -> None:
        self.tmp_path = tmp_path
        self.dsn = dsn
        self.clock = Clock()
        self.databases: list[Database] = []

    def member(self, name: str, key: str = KEY, keep_days: int = 90) -> SharedJournal:
        database = Database(self.dsn)
        self.databases.append(database)
        copy = LocalCopy(self.tmp_path / name / "cache", key)
        return SharedJournal(database, key, copy, keep_days, 7, now=self.clock)

    def sql(self, query: str, params: Any = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return conn.execute(query, params).fetchall()


@pytest.fixture
def team(tmp_path: Path, pg_dsn: str) -> Iterator[Team]:
    made = Team(tmp_path, pg_dsn)
    yield made
    for database in made.databases:
        database.close()


def write(journal: SharedJournal, rel: str, text: str | None,
          source: ChangeSource = CLI) -> str:
    """What the store does for a save (text) or a delete (None) of a note in the copy: the
    root's lock, the holding, the before captured from the copy, the file written inside."""
    path = journal.root / rel
    with root_lock(journal.root, "project", 30), journal.holding():
        before = capture(path)
        after = Captured(None) if text is None else Captured.note(text.encode(), redacted=True)
        action = ("delete" if text is None else "create" if before.state is None
                  else "update")
        with journal.recording(("project", journal.root, rel), action, before, after, source,
                               current=lambda: capture(path)) as change_id:
            if text is None:
                path.unlink()
            else:
                write_atomic(path, text.encode())
    return change_id


def folder_change(journal: SharedJournal, rel: str, action: str) -> str:
    """mkdir (an empty folder) or rmdir (the folder and all it holds), as the store makes it."""
    path = journal.root / rel
    with root_lock(journal.root, "project", 30), journal.holding():
        before = capture(path)
        after = EMPTY_FOLDER if action == "mkdir" else Captured(None)
        with journal.recording(("project", journal.root, rel), action, before, after, CLI,
                               current=lambda: capture(path)) as change_id:
            if action == "mkdir":
                path.mkdir(parents=True)
            else:
                remove(path)
    return change_id


def undo(journal: SharedJournal, change_id: str) -> str:
    """What history/undo.py does for one change: the path put back to the change's before."""
    change = journal.change(change_id)
    assert change is not None
    path = journal.root / change.path
    with root_lock(journal.root, "project", 30), journal.holding():
        with journal.recording(("project", journal.root, change.path), "undo", capture(path),
                               restoring(change.before, journal.blob), CLI,
                               current=lambda: capture(path), undoes=change.id) as undo_id:
            apply(path, change.before, journal.blob, root=journal.root)
    return undo_id


def rows(team: Team, key: str = KEY) -> dict[str, str | None]:
    return dict(team.sql(f"SELECT path, body FROM {SCHEMA}.notes WHERE project = %s",
                         (key,)))


def refuse_commits(team: Team, refuse: bool = True) -> None:
    """Make the server refuse (or take again) every transaction that records a change, at
    its commit (a deferred check), as a full disk or a lost connection would."""
    with psycopg.connect(team.dsn, autocommit=True) as conn:
        if not refuse:
            conn.execute(f"DROP TRIGGER refuse ON {SCHEMA}.history")
            return
        conn.execute("CREATE OR REPLACE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql "
                     "AS $$ BEGIN RAISE EXCEPTION 'the server refused the commit'; END $$")
        conn.execute(f"CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON {SCHEMA}.history "
                     "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse()")


def history(team: Team, key: str = KEY) -> list[tuple[str, str, str | None, str | None]]:
    return [(p, a, b, f) for p, a, b, f in team.sql(
        f"SELECT path, action, before, after FROM {SCHEMA}.history WHERE project = %s "
        "ORDER BY seq", (key,))]


def test_a_notes_create_update_and_delete_are_recorded_in_seq_order_with_their_rows(
        team: Team) -> None:
    alice = team.member("alice")
    first = write(alice, "notes/uv.md", "use uv\n", RUN)
    assert rows(team) == {"notes": None, "notes/uv.md": "use uv\n"}
    second = write(alice, "notes/uv.md", "use uv, not pip\n")
    third = write(alice, "notes/uv.md", None)
    assert rows(team) == {"notes": None}
    changes = alice.changes([alice.root])
    assert [c.id for c in changes] == [third, second, first]  # newest first
    assert [c.action for c in changes] == ["delete", "update", "create"]
    assert changes[0].seq > changes[1].seq > changes[2].seq
    assert {(c.root, c.scope) for c in changes} == {(str(alice.root), "project")}
    assert changes[1].before == changes[2].after and changes[0].before == changes[1].after
    assert alice.blob(str(changes[1].after).removeprefix("note:")) == b"use uv, not pip\n"
    made = changes[2]
    assert (made.source.surface, made.source.task_id, made.source.message) == (
        "memory_run", "bg_3", "remember that I use uv")
    assert made.source.user and made.source.host  # who on the team, as the log shows
    assert source_text(made.source).startswith(f"{made.source.user}@{made.source.host} via ")
    assert alice.copy.seq() == changes[0].seq  # the copy knows it holds its own change
    # Another member's copy catches up to what the server holds.
    bob = team.member("bob")
    write(bob, "notes/pip.md", "no pip\n")
    assert (bob.root / "notes" / "pip.md").read_text() == "no pip\n"
    assert not (bob.root / "notes" / "uv.md").exists()


def test_a_source_names_who_only_when_it_is_known() -> None:
    assert "user" not in RUN.as_json() and "host" not in RUN.as_json()  # disk JSON unchanged
    assert source_text(RUN) == ('memory_run (session sess_' + "a" * 24 + ', task bg_3): '
                                '"remember that I use uv"')
    who = ChangeSource("cli", user="alice", host="laptop")
    assert who.as_json()["user"] == "alice" and source_text(who) == "alice@laptop via cli"


def test_a_before_the_server_no_longer_holds_is_refused_and_nothing_is_written(
        team: Team) -> None:
    alice = team.member("alice")
    write(alice, "uv.md", "use uv\n")
    path = alice.root / "uv.md"
    written = False
    with root_lock(alice.root, "project", 30), alice.holding():
        with pytest.raises(SharedConflict, match="changed on the team's server just now; "
                                                 "nothing was written"):
            # A before that is not what the server holds (the note as it was before).
            with alice.recording(("project", alice.root, "uv.md"), "create", Captured(None),
                                 Captured.note(b"mine\n", redacted=True), CLI,
                                 current=lambda: capture(path)):
                written = True
    assert not written
    assert rows(team) == {"uv.md": "use uv\n"}
    assert [a for _, a, _, _ in history(team)] == ["create"]


def test_the_change_commits_before_the_body_writes_the_copy_and_a_body_error_goes_up(
        team: Team) -> None:
    alice = team.member("alice")
    write(alice, "uv.md", "use uv\n")
    marker = alice.copy.seq()
    path = alice.root / "uv.md"
    with root_lock(alice.root, "project", 30), alice.holding():
        with pytest.raises(RuntimeError), alice.recording(
                ("project", alice.root, "uv.md"), "update", capture(path),
                Captured.note(b"use pip\n", redacted=True), CLI, current=lambda: capture(path)):
            # The team has the change before the copy does: the copy never leads the server.
            assert rows(team) == {"uv.md": "use pip\n"}
            raise RuntimeError("the caller failed")
    assert [a for _, a, _, _ in history(team)] == ["create", "update"]
    assert path.read_text() == "use uv\n" and alice.copy.seq() == marker
    with root_lock(alice.root, "project", 30), alice.holding():
        pass  # the next catch-up brings the change the marker stayed before
    assert path.read_text() == "use pip\n"


def test_a_copy_that_cannot_be_written_after_the_commit_is_a_warning_and_caught_up_later(
        team: Team, caplog: pytest.LogCaptureFixture) -> None:
    alice = team.member("alice")
    write(alice, "uv.md", "use uv\n")
    marker = alice.copy.seq()
    path = alice.root / "uv.md"
    with root_lock(alice.root, "project", 30), alice.holding():
        with alice.recording(("project", alice.root, "uv.md"), "update", capture(path),
                             Captured.note(b"use pip\n", redacted=True), CLI,
                             current=lambda: capture(path)) as change_id:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
    assert alice.changes([alice.root], limit=1)[0].id == change_id  # made for the team
    assert rows(team) == {"uv.md": "use pip\n"}
    assert (f"the local copy of project:uv.md was not written: {path}: No space left on "
            "device; the next catch-up brings it") in caplog.text
    assert path.read_text() == "use uv\n" and alice.copy.seq() == marker
    with root_lock(alice.root, "project", 30), alice.holding():
        pass
    assert path.read_text() == "use pip\n"


def test_a_commit_that_fails_records_nothing_and_never_runs_the_body(team: Team) -> None:
    alice = team.member("alice")
    write(alice, "uv.md", "use uv\n")
    refuse_commits(team)
    path = alice.root / "uv.md"
    ran = False
    with root_lock(alice.root, "project", 30), alice.holding():
        with pytest.raises(JournalError, match="cannot commit: the server refused the commit"
                           ) as caught, alice.recording(
                ("project", alice.root, "uv.md"), "update", capture(path),
                Captured.note(b"use pip\n", redacted=True), CLI, current=lambda: capture(path)):
            ran = True
    assert alice.database.masked in str(caught.value)
    assert not ran and path.read_text() == "use uv\n"
    assert rows(team) == {"uv.md": "use uv\n"}
    assert [a for _, a, _, _ in history(team)] == ["create"]


def test_changes_are_filtered_by_path_task_and_session_newest_first(team: Team) -> None:
    alice = team.member("alice")
    other = ChangeSource("memory_run", "sess_" + "b" * 24, "bg_9", "other")
    folder_change(alice, "lang", "mkdir")
    a = write(alice, "lang/py.md", "py\n", RUN)
    b = write(alice, "lang/py_x.md", "x\n", other)  # a LIKE wildcard in a sibling's name
    c = write(alice, "top.md", "top\n", RUN)
    d = write(alice, "lang/py.md", "py 3\n", other)
    ids = lambda found: [x.id for x in found]  # noqa: E731
    assert ids(alice.changes([alice.root], "lang/py.md"))[:2] == [d, a]
    assert len(alice.changes([alice.root], "lang/py.md")) == 3  # and the folder's mkdir
    assert ids(alice.changes([alice.root], task_id="bg_3")) == [c, a]
    assert ids(alice.changes([alice.root], session_id=other.session_id)) == [d, b]
    assert ids(alice.changes([alice.root], limit=2)) == [d, c]
    assert alice.changes([alice.root / "elsewhere"]) == []  # another root: not this history
    assert team.member("bob", key="github.com/other/repo").changes([alice.root]) == []


def test_later_is_the_changes_after_one_of_its_path_or_a_folder_holding_it(
        team: Team) -> None:
    alice = team.member("alice")
    first = write(alice, "lang/py.md", "py\n")
    write(alice, "lang/other.md", "other\n")
    second = write(alice, "lang/py.md", "py 3\n")
    gone = folder_change(alice, "lang", "rmdir")
    change = alice.change(first)
    assert change is not None
    assert [c.id for c in alice.later(change)] == [second, gone]


def test_the_last_change_of_each_note_is_its_own_or_its_folders(team: Team) -> None:
    alice = team.member("alice")
    saved = write(alice, "lang/py.md", "py\n")
    write(alice, "other.md", "other\n")
    folder_change(alice, "lang", "rmdir")
    restored = undo(alice, alice.changes([alice.root], "lang", limit=1)[0].id)
    found, manifests = alice.last_of_each([(alice.root, "lang/py.md"),
                                           (alice.root, "other.md"),
                                           (alice.root, "none.md"),
                                           (alice.root / "elsewhere", "other.md")])
    assert [c.id if c else None for c in found][:1] == [restored]
    assert found[1] is not None and found[1].action == "create"
    assert found[2] is None and found[3] is None
    assert found[0] is not None and found[0].after is not None
    assert json.loads(manifests[found[0].after.removeprefix("dir:")])["files"] == {
        "py.md": str(alice.changes([alice.root], "lang/py.md")[-1].after).removeprefix("note:")}
    assert saved != restored


def test_a_folders_mkdir_rmdir_and_undo_round_trip_through_the_server(team: Team) -> None:
    alice = team.member("alice")
    folder_change(alice, "lang", "mkdir")
    write(alice, "lang/py.md", "py\n")
    folder_change(alice, "lang/empty", "mkdir")
    # The folder's state as the server's rows make it is what the copy's files make it:
    # otherwise the rmdir's before would be refused as a conflict.
    gone = folder_change(alice, "lang", "rmdir")
    assert rows(team) == {}
    assert not (alice.root / "lang").exists()
    undo(alice, gone)
    assert rows(team) == {"lang": None, "lang/py.md": "py\n", "lang/empty": None}
    assert (alice.root / "lang" / "py.md").read_text() == "py\n"
    assert (alice.root / "lang" / "empty").is_dir()
    folder_change(alice, "lang", "rmdir")  # and again: the state still agrees


def test_held_changes_are_kept_listed_and_released_for_the_team(team: Team) -> None:
    alice, bob = team.member("alice"), team.member("bob")
    held = alice.hold(("project", alice.root, "uv.md"), "create", Captured(None),
                      Captured.note(b"use uv\n", redacted=True), RUN)
    team.clock.now += timedelta(seconds=1)
    other = alice.hold(("project", alice.root, "pip.md"), "create", Captured(None),
                       Captured.note(b"no pip\n", redacted=True), CLI)
    # Another member sees them, named by its own copy's root.
    seen = bob.held()
    assert [h.id for h in seen] == [held.id, other.id]
    assert seen[0].root == str(bob.root) and seen[0].scope == "project"
    assert seen[0].source.task_id == "bg_3" and seen[0].source.user
    assert [h.id for h in bob.held(session_id=RUN.session_id)] == [held.id]
    one = bob.held_one(held.id)
    assert one is not None and bob.blob(str(one.after).removeprefix("note:")) == b"use uv\n"
    assert bob.release(held.id) and not bob.release(held.id)
    assert [h.id for h in alice.held()] == [other.id]


def test_an_approved_change_releases_its_hold_in_the_same_transaction(team: Team) -> None:
    alice = team.member("alice")
    held = alice.hold(("project", alice.root, "uv.md"), "create", Captured(None),
                      Captured.note(b"use uv\n", redacted=True), RUN)
    path = alice.root / "uv.md"
    refuse_commits(team)
    with root_lock(alice.root, "project", 30), alice.holding():
        with pytest.raises(JournalError, match="cannot commit"), alice.recording(
                ("project", alice.root, "uv.md"), "create", Captured(None),
                restoring(held.after, alice.blob), held.source,
                current=lambda: capture(path), releases=held.id):
            pass
    assert alice.held_one(held.id) is not None  # an approve that did not commit keeps it held
    refuse_commits(team, refuse=False)
    with root_lock(alice.root, "project", 30), alice.holding():
        with alice.recording(("project", alice.root, "uv.md"), "create", Captured(None),
                             restoring(held.after, alice.blob), held.source,
                             current=lambda: capture(path), releases=held.id):
            apply(path, held.after, alice.blob, root=alice.root)
    assert alice.held_one(held.id) is None
    assert rows(team) == {"uv.md": "use uv\n"}


def test_a_purge_drops_the_paths_history_for_the_team_and_trims_its_folders_records(
        team: Team) -> None:
    alice = team.member("alice")
    write(alice, "lang/py.md", "py secret-ish\n")
    write(alice, "lang/go.md", "go\n")
    alice.hold(("project", alice.root, "lang/py.md"), "update",
               capture(alice.root / "lang" / "py.md"),
               Captured.note(b"py held\n", redacted=True), CLI)
    gone = folder_change(alice, "lang", "rmdir")
    other = team.member("bob", key="github.com/other/repo")
    write(other, "lang/py.md", "py secret-ish\n")
    count, purge_id = alice.purge(("project", alice.root, "lang/py.md"), CLI)
    assert purge_id is not None and count == 3  # the create, the held one, the rmdir trimmed
    assert [(p, a) for p, a, _, _ in history(team)] == [
        ("lang/go.md", "create"), ("lang", "rmdir"), ("lang/py.md", "purge")]
    rmdir = alice.change(gone)
    assert rmdir is not None and rmdir.before is not None
    assert list(alice.manifest_of(rmdir.before)["files"]) == ["go.md"]
    assert alice.held() == []
    # Its contents are gone from the server, the other project's kept.
    stored = {bytes(d) for (d,) in team.sql(f"SELECT data FROM {SCHEMA}.blobs WHERE "
                                            "project = %s", (KEY,))}
    assert b"py secret-ish\n" not in stored and b"go\n" in stored
    assert other.changes([other.root])[0].action == "create"
    assert alice.purge(("project", alice.root, "lang/py.md"), CLI) == (0, None)


def test_records_and_held_changes_past_their_days_are_pruned_with_their_contents(
        team: Team) -> None:
    alice = team.member("alice", keep_days=30)
    write(alice, "old.md", "old\n")
    write(alice, "old.md", None)
    alice.hold(("project", alice.root, "held.md"), "create", Captured(None),
               Captured.note(b"held\n", redacted=True), CLI)
    team.clock.now += timedelta(days=31)
    write(alice, "new.md", "new\n")
    fresh = team.member("alice-later", keep_days=30)  # a process of its own prunes once
    assert [c.path for c in fresh.changes([fresh.root])] == ["new.md"]
    assert fresh.held() == []
    stored = {bytes(d) for (d,) in team.sql(f"SELECT data FROM {SCHEMA}.blobs")}
    assert stored == {b"new\n"}


def test_a_missing_content_is_a_journal_error_naming_the_server(team: Team) -> None:
    alice = team.member("alice")
    with pytest.raises(JournalError, match="lacks content 0123456789ab") as caught:
        alice.blob("0123456789ab" * 5)
    assert alice.database.masked in str(caught.value)


def test_two_writers_of_one_note_serialise_and_lose_no_record(team: Team) -> None:
    writers = [team.member("alice"), team.member("bob")]
    saves = 25
    start = threading.Barrier(2, timeout=60)
    failures: list[BaseException] = []

    def run(i: int) -> None:
        try:
            start.wait()
            for n in range(saves):
                write(writers[i], "shared.md", f"writer {i} save {n}\n")
        except BaseException as exc:  # reported by the test below
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert failures == [] and not any(t.is_alive() for t in threads)
    records = history(team)
    assert len(records) == 2 * saves
    # Each record's before is the after of the one before it: none was lost or reordered.
    assert [b for _, _, b, _ in records[1:]] == [a for _, _, _, a in records[:-1]]
    last = records[-1][3]
    assert last is not None
    assert str(rows(team)["shared.md"]).encode() == writers[0].blob(last.removeprefix("note:"))


def test_a_connection_lost_mid_change_is_shared_unavailable_and_writes_nothing(
        team: Team) -> None:
    alice = team.member("alice")
    write(alice, "uv.md", "use uv\n")
    path = alice.root / "uv.md"
    written = False
    with pytest.raises(SharedUnavailable, match=r"^shared project memory postgresql://") as caught:
        with root_lock(alice.root, "project", 30), alice.holding():
            team.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                     "current_database() AND pid <> pg_backend_pid()")
            with alice.recording(("project", alice.root, "uv.md"), "update", capture(path),
                                 Captured.note(b"use pip\n", redacted=True), CLI,
                                 current=lambda: capture(path)):
                written = True
    assert not isinstance(caught.value, JournalError)  # the store's outage line, not a record's
    assert not written and path.read_text() == "use uv\n"
    assert [a for _, a, _, _ in history(team)] == ["create"]


def test_a_recording_outside_a_holding_is_a_transaction_of_its_own(team: Team) -> None:
    alice = team.member("alice")
    write(alice, "uv.md", "use uv\n")
    path = alice.root / "uv.md"
    with alice.recording(("project", alice.root, "uv.md"), "update", capture(path),
                         Captured.note(b"use pip\n", redacted=True), CLI,
                         current=lambda: capture(path)) as change_id:
        write_atomic(path, b"use pip\n")
    assert rows(team) == {"uv.md": "use pip\n"}
    assert alice.changes([alice.root], limit=1)[0].id == change_id


def test_a_held_merge_keeps_its_reason_and_other_paths_for_the_team(team: Team) -> None:
    alice, bob = team.member("alice"), team.member("bob")
    write(alice, "build.md", "make\n")
    write(alice, "build-old.md", "make, old\n")
    old = Captured.note(b"make, old\n")
    held = alice.hold(("project", alice.root, "build.md"), "update",
                      Captured.note(b"make\n"), Captured.note(b"make\nold\n", redacted=True), CLI,
                      reason="duplicates", parts=[("build-old.md", "delete", old, Captured(None))])
    seen = bob.held_one(held.id)
    assert seen is not None and seen.reason == "duplicates"
    assert [(p.path, p.action, p.before) for p in seen.parts] == [
        ("build-old.md", "delete", old.state)]
    # A prune's sweep keeps the contents only a merge's other path names.
    bob.hold(("project", bob.root, "x.md"), "create", Captured(None),
             Captured.note(b"x\n", redacted=True), CLI)
    team.clock.now += timedelta(days=30)  # x.md's hold past pending_days: the sweep runs
    with psycopg.connect(team.dsn, autocommit=True) as conn:  # the merge is still held
        conn.execute(f"UPDATE {SCHEMA}.held SET time = %s WHERE id = %s",
                     (team.clock.now, held.id))
    with psycopg.connect(team.dsn, autocommit=True) as conn:  # only the merge names it now
        conn.execute(f"DELETE FROM {SCHEMA}.history WHERE path = 'build-old.md'")
    fresh = team.member("carol")
    fresh.prune()
    assert [h.id for h in fresh.held()] == [held.id]
    assert fresh.blob(str(old.state).removeprefix("note:")) == b"make, old\n"


def test_a_schema_of_version_1_gains_the_held_changes_reason_and_parts(team: Team) -> None:
    alice = team.member("alice")
    alice.held()  # the schema made
    with psycopg.connect(team.dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {SCHEMA}.held DROP COLUMN reason, DROP COLUMN parts")
        conn.execute(f"UPDATE {SCHEMA}.meta SET value = '1' WHERE key = 'schema_version'")
    later = team.member("later")
    held = later.hold(("project", later.root, "a.md"), "create", Captured(None),
                      Captured.note(b"a\n", redacted=True), CLI, reason="why")
    assert later.held_one(held.id) == held
    assert team.sql(f"SELECT value FROM {SCHEMA}.meta WHERE key = 'schema_version'") == [("2",)]
