"""A shared root's local copy: caught up by seq from what the server's notes and history hold
(written here by direct SQL, as another machine's writer would leave them), a first sync made
exact, a tampered row kept inside the copy, and the marker kept between objects."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from acp_memory.memory.rootlock import RootBusy, root_lock
from acp_memory.memory.shared.copy import LocalCopy
from acp_memory.memory.shared.database import Database

KEY = "github.com/org/repo"


@pytest.fixture
def conn(pg_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection to a database with the acp_memory schema."""
    database = Database(pg_dsn)
    try:
        with database.connection() as made:
            yield made
    finally:
        database.close()


def _change(conn: psycopg.Connection[Any], path: str, body: str | None = None, *,
            action: str = "update", folder: bool = False, key: str = KEY) -> int:
    """What a writer commits: the notes rows at path made so (body: a note; folder: a folder;
    neither: path and everything under it gone) and a history record; its seq."""
    if body is None and not folder:
        conn.execute("DELETE FROM acp_memory.notes WHERE project = %s AND (path = %s OR path "
                     "LIKE %s)", (key, path, path + "/%"))
    else:
        conn.execute("INSERT INTO acp_memory.notes VALUES (%s, %s, %s, %s, now(), 'test') "
                     "ON CONFLICT (project, path) DO UPDATE SET body = excluded.body",
                     (key, path, body, None if folder else "hash"))
    row = conn.execute("INSERT INTO acp_memory.history(id, project, path, action, source, time)"
                       " VALUES (%s, %s, %s, %s, '{}', now()) RETURNING seq",
                       ("chg_" + uuid.uuid4().hex, key, path, action)).fetchone()
    conn.commit()
    assert row is not None
    return int(row[0])


def _files(root: Path) -> dict[str, str | None]:
    """Every entry under root: a file's text, None for a folder."""
    return {p.relative_to(root).as_posix(): None if p.is_dir() else p.read_text()
            for p in sorted(root.rglob("*"))}


def test_a_first_sync_makes_the_copy_exactly_the_servers_notes(
        conn: psycopg.Connection[Any], tmp_path: Path) -> None:
    _change(conn, "a.md", "alpha")
    _change(conn, "f", folder=True)
    _change(conn, "f/b.md", "beta")
    _change(conn, "empty", folder=True)
    last = _change(conn, "other.md", "not ours", key="github.com/org/other")
    copy = LocalCopy(tmp_path / "cache", KEY)
    (copy.root / "f").mkdir(parents=True)
    (copy.root / "stray.md").write_text("gone")
    (copy.root / "f" / "old.md").write_text("gone")
    (copy.root / "f" / "b.md").write_text("stale")
    (copy.root / "old").mkdir()

    copy.catch_up(conn)

    assert _files(copy.root) == {"a.md": "alpha", "empty": None, "f": None, "f/b.md": "beta"}
    assert copy.seq() == last - 1  # the other project's change is not ours
    assert copy.synced_at() is not None


def test_a_first_sync_into_a_new_home_makes_every_row_and_skips_one_that_cannot_be(
        conn: psycopg.Connection[Any], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _change(conn, "a.md", "alpha")
    _change(conn, "f/b.md", "beta")
    _change(conn, "empty", folder=True)
    last = _change(conn, "a.md/c.md", "a note where a note is")  # a tampered row
    copy = LocalCopy(tmp_path / "cache", KEY)

    with caplog.at_level(logging.WARNING):
        copy.catch_up(conn)

    assert _files(copy.root) == {"a.md": "alpha", "empty": None, "f": None, "f/b.md": "beta"}
    assert copy.seq() == last
    assert [r.getMessage() for r in caplog.records if "a.md/c.md" in r.getMessage()]
    # A fill cut short (a torn file, the marker never written) is made right by the next one.
    (copy.root / "f" / "b.md").write_text("be")
    (copy.folder / "state.json").unlink()  # the marker
    copy.catch_up(conn)
    assert _files(copy.root)["f/b.md"] == "beta"


def test_catch_up_applies_creates_updates_deletes_and_folders(
        conn: psycopg.Connection[Any], tmp_path: Path) -> None:
    copy = LocalCopy(tmp_path / "cache", KEY)
    assert copy.catch_up(conn) == 0 and copy.seq() == 0 and copy.synced_at() is not None

    _change(conn, "x.md", "one", action="create")
    _change(conn, "d", folder=True, action="mkdir")
    seq = _change(conn, "d/y.md", "why", action="create")
    assert copy.catch_up(conn) == 3
    assert _files(copy.root) == {"d": None, "d/y.md": "why", "x.md": "one"}
    assert copy.seq() == seq

    _change(conn, "x.md", "two")
    _change(conn, "d", action="delete")  # the folder and what it holds
    _change(conn, "n/deep/z.md", "zed", action="create")  # its folders have no rows
    (copy.root / "n").write_text("a stale file where a folder belongs")
    assert copy.catch_up(conn) == 3
    assert _files(copy.root) == {"n": None, "n/deep": None, "n/deep/z.md": "zed",
                                 "x.md": "two"}

    _change(conn, "x.md", action="delete")
    _change(conn, "x.md", folder=True, action="mkdir")  # a note became a folder
    assert copy.catch_up(conn) == 1
    assert (copy.root / "x.md").is_dir()
    assert copy.catch_up(conn) == 0  # nothing new


def test_a_purge_record_changes_no_file_and_moves_the_marker(
        conn: psycopg.Connection[Any], tmp_path: Path) -> None:
    _change(conn, "a.md", "alpha")
    copy = LocalCopy(tmp_path / "cache", KEY)
    copy.catch_up(conn)
    before = (copy.root / "a.md").stat().st_mtime_ns
    conn.execute("DELETE FROM acp_memory.history WHERE project = %s", (KEY,))
    seq = _change(conn, "a.md", "alpha", action="purge")
    assert copy.catch_up(conn) == 0
    assert (copy.root / "a.md").stat().st_mtime_ns == before
    assert copy.seq() == seq


def test_a_purge_of_a_change_not_applied_yet_still_brings_its_path_up_to_date(
        conn: psycopg.Connection[Any], tmp_path: Path) -> None:
    _change(conn, "keep.md", "its record keeps the catch-up incremental")
    _change(conn, "a.md", "alpha")
    copy = LocalCopy(tmp_path / "cache", KEY)
    copy.catch_up(conn)
    _change(conn, "a.md", "changed, then its history purged")
    conn.execute("DELETE FROM acp_memory.history WHERE project = %s AND path = 'a.md'", (KEY,))
    _change(conn, "b.md", "beta", action="create")
    _change(conn, "a.md", "changed, then its history purged", action="purge")
    copy.catch_up(conn)
    assert (copy.root / "a.md").read_text() == "changed, then its history purged"


def test_a_tampered_row_never_leaves_the_copy(
        conn: psycopg.Connection[Any], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    copy = LocalCopy(tmp_path / "cache", KEY)
    copy.root.mkdir(parents=True)
    (copy.root / "link").symlink_to(outside)  # planted in the copy
    for path in ("../../../outside/up.md", f"{outside}/abs.md", "a/../../esc.md",
                 "%2e%2e/enc.md", ".hidden.md", "run.sh"):
        _change(conn, path, "evil")
    _change(conn, "link/n.md", "through a link")
    _change(conn, "ok.md", "fine")

    with caplog.at_level(logging.WARNING):
        copy.catch_up(conn)

    assert list(outside.iterdir()) == []
    assert _files(copy.root) == {"link": None, "link/n.md": "through a link", "ok.md": "fine"}
    assert not (copy.root / "link").is_symlink()
    assert not any(p.name in ("up.md", "abs.md", "esc.md", "enc.md")
                   for p in tmp_path.rglob("*.md"))
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 6 and all("skipped" in line for line in warned)


def test_the_marker_outlives_the_object_and_the_next_catch_up_is_incremental(
        conn: psycopg.Connection[Any], tmp_path: Path) -> None:
    seq = _change(conn, "a.md", "alpha")
    LocalCopy(tmp_path / "cache", KEY).catch_up(conn)
    again = LocalCopy(tmp_path / "cache", KEY)
    assert again.seq() == seq
    (again.root / "untouched.md").write_text("a first sync would remove this")
    (again.root / "a.md").write_text("reading a.md's change again would undo this")
    _change(conn, "b.md", "beta")
    assert again.catch_up(conn) == 1
    assert (again.root / "untouched.md").exists() and (again.root / "b.md").exists()
    # Only the changes after the marker were read: a.md's, before it, was not applied again.
    assert (again.root / "a.md").read_text() == "reading a.md's change again would undo this"


def test_a_marker_of_another_key_or_torn_means_a_first_sync(
        conn: psycopg.Connection[Any], tmp_path: Path) -> None:
    _change(conn, "a.md", "alpha")
    copy = LocalCopy(tmp_path / "cache", KEY)
    copy.catch_up(conn)
    (copy.root / "stray.md").write_text("x")
    (copy.folder / "state.json").write_text('{"key": "github.com/else/where", "seq": 99, '
                                            '"synced_at": "2026-01-01T00:00:00.000Z"}')
    assert copy.seq() == 0 and copy.synced_at() is None
    copy.catch_up(conn)
    assert not (copy.root / "stray.md").exists()
    (copy.root / "stray.md").write_text("x")
    (copy.folder / "state.json").write_text('{"key": ')
    copy.catch_up(conn)
    assert not (copy.root / "stray.md").exists()


def test_history_pruned_past_the_marker_means_a_first_sync(
        conn: psycopg.Connection[Any], tmp_path: Path) -> None:
    _change(conn, "a.md", "alpha")
    copy = LocalCopy(tmp_path / "cache", KEY)
    copy.catch_up(conn)
    _change(conn, "gone.md", "soon gone")
    conn.execute("DELETE FROM acp_memory.notes WHERE path = 'gone.md'")
    conn.execute("DELETE FROM acp_memory.history")  # pruned: gone.md's records with it
    _change(conn, "b.md", "beta")
    _change(conn, "c.md", "gamma")
    (copy.root / "gone.md").write_text("stale")
    copy.catch_up(conn)
    assert _files(copy.root) == {"a.md": "alpha", "b.md": "beta", "c.md": "gamma"}


def test_catch_up_holds_the_roots_lock_unless_told_the_caller_does(
        conn: psycopg.Connection[Any], tmp_path: Path) -> None:
    copy = LocalCopy(tmp_path / "cache", KEY, lock_timeout=0.05)
    _change(conn, "a.md", "alpha")
    with root_lock(copy.root, "project", 1.0):
        with pytest.raises(RootBusy):
            copy.catch_up(conn)
        assert not (copy.root / "a.md").exists()
        conn.rollback()
        assert copy.catch_up(conn, locked=True) == 1
    assert (copy.root / "a.md").read_text() == "alpha"


def test_applied_moves_the_marker_forward_only(
        conn: psycopg.Connection[Any], tmp_path: Path) -> None:
    copy = LocalCopy(tmp_path / "cache", KEY)
    copy.applied(5)
    assert copy.seq() == 0  # never synced: the next catch-up copies everything
    seq = _change(conn, "a.md", "alpha")
    copy.catch_up(conn)
    copy.applied(seq + 10)
    assert copy.seq() == seq + 10
    copy.applied(seq)
    assert copy.seq() == seq + 10
