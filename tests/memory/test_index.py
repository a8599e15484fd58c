"""Search indexes: how many stay open, what closing releases, and a cache that cannot be written."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import pytest

from acp_memory.config import Config, Paths
from acp_memory.memory.index.indexes import SearchIndexes
from acp_memory.memory.index.root import RootIndex
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore
from acp_memory.text.analyze import parse_query


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def note_root(tmp_path: Path, name: str, text: str = "the walrus sleeps") -> Path:
    root = tmp_path / name / "memory"
    root.mkdir(parents=True)
    (root / "note.md").write_text(text)
    return root


@pytest.fixture
def closed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The roots whose index was closed, in order: what eviction and `close()` do."""
    roots: list[Path] = []
    close = RootIndex.close

    def recording(index: RootIndex) -> None:
        roots.append(index.root)
        close(index)

    monkeypatch.setattr(RootIndex, "close", recording)
    return roots


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_searching_200_roots_keeps_the_open_descriptors_bounded_and_close_releases_them(
    tmp_path: Path, closed: list[Path]
) -> None:
    cache = tmp_path / "cache"
    before = open_fds()
    peak = before
    with SearchIndexes(cache, max_roots=4) as indexes:
        # A hundred sessions' stores sharing the indexes: 200 roots, global and project.
        for i in range(100):
            roots = Roots(note_root(tmp_path, f"g{i}"), note_root(tmp_path, f"p{i}"))
            store = MemoryStore(roots, cache, indexes=indexes)
            assert [h.path for h in store.search("walrus")] == ["global:note.md",
                                                                 "project:note.md"]
            store.close()  # not the store's to close: the shared indexes stay usable
            peak = max(peak, open_fds())
            if i == 1:
                full = open_fds()  # four roots open: their connections and watches
        assert len(closed) == 200 - 4  # four stay open
        assert peak <= full
    assert open_fds() == before
    assert len(set(closed)) == 200


def test_a_store_closes_the_indexes_it_opened(tmp_path: Path) -> None:
    before = open_fds()
    roots = Roots(note_root(tmp_path, "g"), note_root(tmp_path, "p"))
    with MemoryStore(roots, tmp_path / "cache") as store:
        assert len(store.search("walrus")) == 2
        assert open_fds() > before
    assert open_fds() == before


def test_the_least_recently_searched_root_is_the_one_closed(
    tmp_path: Path, closed: list[Path]
) -> None:
    a, b, c = (note_root(tmp_path, name) for name in "abc")
    query = parse_query("walrus")
    with SearchIndexes(tmp_path / "cache", max_roots=2) as indexes:
        indexes.candidates(a, query, 8)
        indexes.candidates(b, query, 8)
        indexes.candidates(a, query, 8)  # a is now more recent than b
        indexes.candidates(c, query, 8)
        assert closed == [b]
        indexes.candidates(b, query, 8)  # a is now the least recent
        assert closed == [b, a]


def test_an_index_in_use_is_closed_only_when_its_search_ends(
    tmp_path: Path, closed: list[Path]
) -> None:
    a, b = note_root(tmp_path, "a"), note_root(tmp_path, "b")
    query = parse_query("walrus")
    with SearchIndexes(tmp_path / "cache", max_roots=1) as indexes:
        with indexes._lease(a) as index:
            index.refresh()
            indexes.candidates(b, query, 8)  # over the limit: a is the least recent, but busy
            assert closed == []  # a and b both open
            assert [c.rel for c in index.candidates(query, 8)] == ["note.md"]
        assert closed == [a]  # the limit holds again once a's search ended
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            index.candidates(query, 8)


@pytest.mark.parametrize("blocked", ["read-only", "not a folder"])
def test_a_cache_that_cannot_be_written_means_an_index_in_memory_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, blocked: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    cache = home / "cache"
    roots = Roots(note_root(tmp_path, "g"), note_root(tmp_path, "p"))
    if blocked == "read-only":
        if os.geteuid() == 0:
            pytest.skip("permissions do not stop root")
        home.chmod(0o555)
    else:
        cache.write_text("a file where the cache folder should be")
    try:
        with caplog.at_level(logging.WARNING), MemoryStore(roots, cache) as store:
            assert len(store.search("walrus")) == 2
            (roots.global_root / "new.md").write_text("a walrus arrives")
            assert len(store.search("walrus")) == 3
    finally:
        home.chmod(0o755)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "in memory" in warnings[0] and str(cache) in warnings[0]
    assert not (cache / "search").exists()


def test_a_cache_that_stops_taking_writes_falls_back_to_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = note_root(tmp_path, "g")
    with SearchIndexes(tmp_path / "cache") as indexes:
        assert [c.rel for c in indexes.candidates(root, parse_query("walrus"), 8)] == ["note.md"]
        (root / "new.md").write_text("another walrus")
        with indexes._lease(root) as index:
            index._db.execute("PRAGMA query_only=ON")  # as a remount read-only would
        with caplog.at_level(logging.WARNING):
            found = indexes.candidates(root, parse_query("walrus"), 8)
        assert sorted(c.rel for c in found) == ["new.md", "note.md"]
    assert ["in memory" in r.getMessage() for r in caplog.records] == [True]


def test_the_number_of_open_roots_comes_from_the_config(tmp_path: Path) -> None:
    cfg = Config.model_validate({"memory": {"index_max_roots": 3}})
    paths = Paths(home=tmp_path / "home", config_file=tmp_path / "c.yaml",
                  sessions_dir=tmp_path / "s", cwd=tmp_path)
    with MemoryStore.from_config(cfg, paths) as store:
        assert store.indexes.max_roots == 3 and store.indexes.cache_dir == paths.cache_dir


def test_a_large_update_gives_back_its_write_ahead_log_while_the_index_stays_open(
    tmp_path: Path,
) -> None:
    root = tmp_path / "memory"
    root.mkdir()
    for i in range(1100):  # past the size from which an update truncates its WAL
        (root / f"n{i}.md").write_text(f"note {i} about walruses and their tusks " * 20)
    with SearchIndexes(tmp_path / "cache") as indexes:
        indexes.build(root)
        with indexes._lease(root) as index:
            assert index.db_path is not None
            wal = Path(f"{index.db_path}-wal")
            assert wal.exists() and wal.stat().st_size == 0
        assert len(indexes.candidates(root, parse_query("walrus tusks"), 8)) == 8
