"""A shared root in a process: one per DSN and key, its local copy refreshed at most once a
second unless a NOTIFY pokes it, and the offline marker while the server cannot be reached."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_memory.config import Config, Paths
from acp_memory.memory.shared import root as root_module
from acp_memory.memory.shared.copy import LocalCopy
from acp_memory.memory.shared.database import Database
from acp_memory.memory.shared.journal import SharedJournal
from acp_memory.memory.shared.root import SharedRoot, shared_root_for

KEY = "github.com/org/repo"


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def made() -> Iterator[list[Database]]:
    databases: list[Database] = []
    yield databases
    for database in databases:
        database.close()


def _root(dsn: str, cache: Path, made: list[Database], clock: Ticks) -> SharedRoot:
    database = Database(dsn)
    made.append(database)
    copy = LocalCopy(cache, KEY)
    return SharedRoot(KEY, database, copy, SharedJournal(database, KEY, copy), clock=clock)


def _saved(database: Database, path: str, body: str) -> None:
    """A note another machine saved: its row and its history record, committed."""
    with database.connection() as conn:
        conn.execute("INSERT INTO acp_memory.notes VALUES (%s, %s, %s, 'hash', now(), 'test')",
                     (KEY, path, body))
        conn.execute("INSERT INTO acp_memory.history(id, project, path, action, source, time) "
                     "VALUES (%s, %s, %s, 'create', '{}', now())",
                     ("chg_" + uuid.uuid4().hex, KEY, path))
        conn.commit()


def test_refresh_catches_up_once_a_second_unless_poked(
        pg_dsn: str, tmp_path: Path, made: list[Database]) -> None:
    clock = Ticks()
    root = _root(pg_dsn, tmp_path / "cache", made, clock)
    _saved(root.database, "a.md", "alpha")
    assert root.refresh() is None
    assert (root.root / "a.md").read_text() == "alpha"

    _saved(root.database, "b.md", "beta")
    clock.now += 0.5
    assert root.refresh() is None
    assert not (root.root / "b.md").exists()  # caught up half a second ago
    root.poke()
    assert root.refresh() is None
    assert (root.root / "b.md").read_text() == "beta"

    _saved(root.database, "c.md", "gamma")
    clock.now += 0.9
    root.refresh()
    assert not (root.root / "c.md").exists()
    clock.now += 0.1
    root.refresh()
    assert (root.root / "c.md").read_text() == "gamma"


def test_an_unreachable_server_gives_the_offline_marker_with_the_last_sync(
        tmp_path: Path, made: list[Database]) -> None:
    clock = Ticks()
    root = _root(f"postgresql://alice:s3cret@/notes?host={tmp_path}", tmp_path / "cache", made,
                 clock)
    assert root.refresh() == "shared memory offline: synced never"
    root.copy.folder.mkdir(parents=True)
    (root.copy.folder / "state.json").write_text(
        f'{{"key": "{KEY}", "seq": 4, "synced_at": "2026-12-07T09:12:03.456Z"}}')
    assert root.refresh() == "shared memory offline: synced never"  # within the second
    clock.now += 1
    assert root.refresh() == "shared memory offline: synced 2026-12-07 09:12:03 UTC"
    assert "s3cret" not in (root.database.last_error or "s3cret")


def test_the_marker_clears_once_the_server_is_back(
        pg_server, pg_dsn: str, tmp_path: Path, made: list[Database]) -> None:
    clock = Ticks()
    root = _root(pg_dsn, tmp_path / "cache", made, clock)
    assert root.refresh() is None
    pg_server.stop()
    try:
        clock.now += 1
        offline = root.refresh()
    finally:
        pg_server.start()
    assert offline is not None and offline.startswith("shared memory offline: synced 20")
    assert root.refresh() == offline  # within the second: no new attempt
    clock.now += 1
    _saved(root.database, "a.md", "written while we were away")
    assert root.refresh() is None
    assert (root.root / "a.md").read_text() == "written while we were away"


def test_one_shared_root_per_dsn_and_key(pg_dsn: str, paths: Paths) -> None:
    cfg = Config.model_validate({"memory": {"shared": {"dsn": pg_dsn}, "history_days": 30,
                                            "pending_days": 3}})
    try:
        first = shared_root_for(cfg, paths, KEY)
        assert shared_root_for(cfg, paths, KEY) is first
        other = shared_root_for(cfg, paths, "github.com/org/other")
        assert other is not first and other.database is first.database
        assert first.root == paths.cache_dir / "shared" / first.copy.folder.name / "notes"
        assert (first.journal.keep_days, first.journal.pending_days) == (30, 3)
    finally:
        root_module.close_all()
    assert shared_root_for(cfg, paths, KEY) is not first
    root_module.close_all()
