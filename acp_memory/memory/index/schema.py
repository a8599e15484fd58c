"""An index's database: its file in the cache folder, its schema, and opening it.

A cache that cannot be read is rebuilt, never repaired; with no file the index lives in memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
from pathlib import Path

log = logging.getLogger(__name__)

SCHEMA_VERSION = 6
# `fts` is contentless (content=''): the note files hold the text, so the index keeps only the
# inverted index and, per note, the compressed values it fed FTS5 (`files.terms`), which a
# delete needs back (sync.py). detail=full stays: BM25 counts each word's occurrences.
# FTS5's IDF is clamped to ~0 for a word in half the notes or more, which flattens every score
# in a small collection; empty padding rows keep IDF positive and matter little in large ones.
_PADDING_ROWS = 16
_SCHEMA = """
CREATE TABLE files(id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL,
                   mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, ino INTEGER NOT NULL,
                   terms BLOB NOT NULL);
CREATE VIRTUAL TABLE fts USING fts5(path, exact, stems, content='',
                                    tokenize="unicode61 remove_diacritics 0 tokenchars '_'");
CREATE TABLE vectors(seq INTEGER PRIMARY KEY AUTOINCREMENT, file_id INTEGER NOT NULL,
                     model TEXT NOT NULL, vec BLOB NOT NULL, UNIQUE (file_id, model));
CREATE INDEX vectors_of_model ON vectors(model, seq);
CREATE TABLE meta(key TEXT PRIMARY KEY, value BLOB NOT NULL);
"""
# A note's packed terms (a KB or two) fill a 16 KB page with little left over; 4 KB pages left
# 9% of the file in gaps (bench/search.py).
_PAGE_BYTES = 16384
_BUSY_MS = 30_000
# FTS5 flushes its pending terms as a segment past this size (1 MB by default): fewer, larger
# segments make a 40 MB build a third faster (bench/search.py).
_HASH_BYTES = 16 << 20


def db_path_for(root: Path, cache_dir: Path) -> Path:
    """The index file of a root, named by a hash of the root's real path."""
    digest = hashlib.sha256(str(root.resolve()).encode("utf-8")).hexdigest()[:20]
    return cache_dir / "search" / f"{digest}.sqlite3"


def open_db(db_path: Path | None) -> sqlite3.Connection:
    """The index database at db_path (in memory when None), with the current schema."""
    if db_path is None:
        return _connect(":memory:")
    db_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return _connect(db_path)
    except sqlite3.OperationalError:
        raise  # cannot open or write it (read-only, locked): not a damaged file
    except sqlite3.DatabaseError:
        log.warning("search index %s is unreadable; rebuilding it", db_path)
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{db_path}{suffix}")
        return _connect(db_path)


def _connect(where: Path | str) -> sqlite3.Connection:
    db = sqlite3.connect(where, timeout=_BUSY_MS / 1000, isolation_level=None,
                         check_same_thread=False)
    try:
        _prepare(db)
    except BaseException:
        db.close()
        raise
    return db


def _prepare(db: sqlite3.Connection) -> None:
    db.execute(f"PRAGMA page_size={_PAGE_BYTES}")  # a new file only
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("BEGIN IMMEDIATE")
    rebuilt = False
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            rebuilt = True
            db.execute("DROP TABLE IF EXISTS files")
            db.execute("DROP TABLE IF EXISTS fts")
            db.execute("DROP TABLE IF EXISTS vectors")
            db.execute("DROP TABLE IF EXISTS meta")
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    db.execute(stmt)
            db.executemany(
                "INSERT INTO fts(rowid, path, exact, stems) VALUES (?, '', '', '')",
                [(-n,) for n in range(1, _PADDING_ROWS + 1)],
            )
            db.execute("INSERT INTO fts(fts, rank) VALUES ('hashsize', ?)", (_HASH_BYTES,))
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    if rebuilt and db.execute("PRAGMA page_size").fetchone()[0] != _PAGE_BYTES:
        _repage(db)


def _repage(db: sqlite3.Connection) -> None:
    """Give an index emptied for a new schema the current page size, if no other process has
    it open (a WAL database changes page size only out of WAL, alone); else it keeps its own."""
    db.execute("PRAGMA busy_timeout=0")  # another process has it open: not worth a wait
    try:
        with contextlib.suppress(sqlite3.OperationalError):
            db.execute("PRAGMA journal_mode=DELETE")
            db.execute(f"PRAGMA page_size={_PAGE_BYTES}")
            db.execute("VACUUM")
        db.execute("PRAGMA journal_mode=WAL")
    finally:
        db.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
