"""Search indexes: how many stay open, what closing releases, and a cache that cannot be written."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from acp_memory.config import Config, Paths
from acp_memory.memory.index import schema
from acp_memory.memory.index.indexes import SearchIndexes
from acp_memory.memory.index.root import RootIndex
from acp_memory.memory.index.schema import db_path_for
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


def vocabulary(db_path: Path) -> list[tuple[str, str, int, int]]:
    """Every term of an index's FTS5 table by column, with how many notes hold it and how
    often: what the table holds, whatever its rows' ids."""
    db = sqlite3.connect(db_path)
    try:
        db.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, fts, col)")
        return db.execute("SELECT term, col, doc, cnt FROM temp.vocab ORDER BY 1, 2").fetchall()
    finally:
        db.close()


def test_an_edited_and_a_deleted_note_leave_no_trace_of_their_old_words(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    root.mkdir()
    (root / "keep.md").write_text("The heron fishes at dawn.")
    (root / "edit.md").write_text("The walrus sleeps on the ice.")
    (root / "gone.md").write_text("A narwhal and its tusk.")
    with SearchIndexes(tmp_path / "kept") as indexes:
        assert indexes.build(root)
        (root / "edit.md").write_text("The otter swims in the kelp.")
        (root / "gone.md").unlink()
        assert indexes.build(root)
    with SearchIndexes(tmp_path / "fresh") as indexes:
        assert indexes.build(root)
    kept = vocabulary(db_path_for(root, tmp_path / "kept"))
    assert not {"walrus", "ice", "narwhal", "tusk"} & {term for term, *_ in kept}
    assert kept == vocabulary(db_path_for(root, tmp_path / "fresh"))


def test_an_index_of_an_older_schema_is_rebuilt_from_the_files(tmp_path: Path) -> None:
    root = note_root(tmp_path, "g", "the heron fishes")
    db_path = db_path_for(root, tmp_path / "cache")
    db_path.parent.mkdir(parents=True)
    st = (root / "note.md").stat()
    old = sqlite3.connect(db_path)  # the previous schema, up to date by its stamps
    old.executescript(f"""
        PRAGMA page_size=4096;
        CREATE TABLE files(id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL,
                           mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL,
                           ino INTEGER NOT NULL);
        CREATE VIRTUAL TABLE fts USING fts5(path, exact, stems);
        INSERT INTO files VALUES (1, 'note.md', {st.st_mtime_ns}, {st.st_size}, {st.st_ino});
        INSERT INTO fts(rowid, path, exact, stems) VALUES (1, 'note', 'the walrus', 'walrus');
        PRAGMA user_version=5;  -- the last schema with its text in the index
    """)
    old.close()
    with SearchIndexes(tmp_path / "cache") as indexes:
        assert [c.rel for c in indexes.candidates(root, parse_query("heron"), 8)] == ["note.md"]
        assert not indexes.candidates(root, parse_query("walrus"), 8)
    rebuilt = sqlite3.connect(db_path)
    try:  # and no other process had it open: it takes the current page size too
        assert rebuilt.execute("PRAGMA page_size").fetchone()[0] == schema._PAGE_BYTES
    finally:
        rebuilt.close()


def varied_notes(root: Path, count: int) -> None:
    root.mkdir(parents=True)
    for i in range(count):
        (root / f"topic-{i % 7}" / f"Note{i}.md").parent.mkdir(exist_ok=True)
        (root / f"topic-{i % 7}" / f"Note{i}.md").write_text(
            f"Walruses {i} sleeping on ice, parse_config and HTTPServer{i % 5}, "
            f"ёжик бежал по дорогам {i}, 東京タワー, well-known MEMFRUIT-{i:04X}.\n" * (1 + i % 3)
        )


def stored(db_path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    db = sqlite3.connect(db_path)
    try:
        return (db.execute("SELECT path, size, terms FROM files ORDER BY path").fetchall(),
                db.execute("SELECT key, value FROM meta").fetchall())
    finally:
        db.close()


def test_a_build_stopped_midway_keeps_the_batches_it_wrote(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    varied_notes(root, 600)
    looks = 0

    def stop_after_a_batch() -> bool:
        nonlocal looks
        looks += 1
        return looks > 1

    with SearchIndexes(tmp_path / "cache") as indexes:
        assert not indexes.build(root, None, stop_after_a_batch)
    rows, _ = stored(db_path_for(root, tmp_path / "cache"))
    assert len(rows) == 256  # the batch written before the stop is kept

