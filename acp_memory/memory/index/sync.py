"""Keeping an index in step with the files, which are the source of truth.

The first refresh walks the root comparing stamps (mtime, size, inode) per note and indexes
what changed, so a root edited while no agent ran is brought up to date, not rebuilt; later
refreshes re-index only the files inotify reported. Without inotify (not Linux, or out of
watches) every refresh walks the tree, which is slower but just as correct.

Many notes are indexed a batch at a time, committed about every 32 MB, so memory stays bounded
and a build cut short keeps what it committed.

The FTS5 table is contentless: the note files hold the text, and snippets are cut from them.
Deleting a row from such a table takes the values it was given, so each note keeps them packed
(`terms.pack`) in its `files` row, and a delete or an update feeds exactly those back.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import sqlite3
from collections.abc import Callable, Generator, Iterable
from pathlib import Path

from acp_memory.memory.index import terms
from acp_memory.memory.index.files import Stamp, stamp_of, walk_notes
from acp_memory.memory.roots import is_note_name
from acp_memory.memory.watch import Watcher

log = logging.getLogger(__name__)

# (notes done, notes to do): called as indexing goes, from the thread that asked for it.
Progress = Callable[[int, int], None]
# Notes analysed and written at a time, and the text a transaction takes before commit: each
# commit flushes FTS5's pending terms as a segment, so fewer, larger ones build faster.
_BATCH = 256
_COMMIT_CHARS = 32 << 20
_SHRINK_WAL_FROM = 4 * _BATCH  # notes written by one update
# The notes a build needs for the index's packing dictionary to be made from them, and the
# most it reads for that (spread over the build).
_TRAIN_FROM = 64
_TRAIN_ON = 128  # twice as many pack 2% smaller, but hold up the start (read in this thread)


# A note ready for the writer: (path, stamp, path column, exact column, stems column, the
# three packed).
Row = tuple[str, Stamp, str, str, str, bytes]


class FileSync:
    """Brings one root's index up to date with its files; not thread-safe (the index locks)."""

    def __init__(self, root: Path, db: sqlite3.Connection) -> None:
        self.root = root
        self._db = db
        self._watcher: Watcher | None = None
        self._synced = False
        self.changes = 0  # notes indexed or dropped so far: what asks for new vectors

    @property
    def synced(self) -> bool:
        """Whether a full walk has been done, so that a refresh only drains the watcher."""
        return self._synced

    def refresh(
        self, progress: Progress | None = None, stop: Callable[[], bool] | None = None
    ) -> bool:
        """Bring the index up to date with the files on disk; False when `stop` cut it short."""
        if self._synced and self._watcher is not None:
            changes = self._watcher.drain()
            if not changes.rescan:
                if changes.files:
                    stats = {rel: stamp_of(self.root, rel) for rel in changes.files}
                    self._apply(stats, forced=changes.files)
                return True
        return self._full_sync(progress, stop)

    def close(self) -> None:
        """Stop watching the root; the next refresh walks it again."""
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
        self._synced = False

    def _full_sync(self, progress: Progress | None, stop: Callable[[], bool] | None) -> bool:
        self.close()
        watcher: Watcher | None
        try:
            watcher = Watcher() if self.root.is_dir() else None
        except OSError:
            watcher = None
        try:
            seen = dict(walk_notes(self.root, watcher.add if watcher else None))
        except OSError as exc:
            # Out of inotify watches, most likely: fall back to a walk on every search.
            log.info("search index for %s runs without change notification: %s", self.root, exc)
            if watcher is not None:
                watcher.close()
            watcher = None
            seen = dict(walk_notes(self.root))
        known = {row[0] for row in self._db.execute("SELECT path FROM files")}
        updates: dict[str, Stamp | None] = dict(seen)
        updates.update({rel: None for rel in known - seen.keys()})
        if not self._apply(updates, forced=set(), progress=progress, stop=stop):
            if watcher is not None:
                watcher.close()
            return False
        self._watcher = watcher
        self._synced = watcher is not None
        return True

    def _apply(
        self,
        updates: dict[str, Stamp | None],
        forced: set[str],
        progress: Progress | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Re-index changed notes and drop vanished ones; False when `stop` cut it short
        (what was committed stays: the next sync compares stamps and does the rest)."""
        gone, todo = self._changes(updates, forced)
        self.changes += len(gone) + len(todo)
        if gone:
            with _transaction(self._db):
                _drop(self._db, gone, _dictionary(self._db))
        if not todo:
            return True
        return self._in_batches(todo, progress, stop)

    def _changes(
        self, updates: dict[str, Stamp | None], forced: set[str]
    ) -> tuple[list[int], list[tuple[str, Stamp]]]:
        """The ids of notes gone and the (path, stamp) of notes to index."""
        if len(updates) > 64:
            rows = self._db.execute("SELECT path, id, mtime_ns, size, ino FROM files")
        else:
            marks = ",".join("?" * len(updates))
            rows = self._db.execute(
                f"SELECT path, id, mtime_ns, size, ino FROM files WHERE path IN ({marks})",
                list(updates),
            )
        known = {path: (rowid, (mtime, size, ino)) for path, rowid, mtime, size, ino in rows}
        gone: list[int] = []
        todo: list[tuple[str, Stamp]] = []
        for rel, stamp in updates.items():
            row = known.get(rel)
            if stamp is None or not is_note_name(rel.rsplit("/", 1)[-1]):
                if row is not None:
                    gone.append(row[0])
            elif row is None or row[1] != stamp or rel in forced:
                todo.append((rel, stamp))
        return gone, todo

    def _rows(self, todo: Iterable[tuple[str, Stamp]]) -> Generator[Row, None, None]:
        """The notes that could be read, analysed."""
        todo = list(todo)
        zdict = self._dictionary(todo)
        for rel, stamp in todo:
            columns = terms.note_terms(self.root, rel, zdict)
            if columns is not None:
                yield (rel, stamp, *columns)

    def _dictionary(self, todo: list[tuple[str, Stamp]]) -> bytes:
        """The index's packing dictionary, made from todo's notes when it has none yet and
        todo is large enough; in the open transaction, so it is kept with the first rows
        packed with it, or neither is."""
        zdict = _dictionary(self._db)
        if zdict or len(todo) < _TRAIN_FROM:
            return zdict
        sample = todo[:: max(1, len(todo) // _TRAIN_ON)][:_TRAIN_ON]
        zdict = terms.train(self.root, (rel for rel, _ in sample))
        self._db.execute("INSERT INTO meta(key, value) VALUES ('zdict', ?)", (zdict,))
        return zdict

    def _in_batches(
        self, todo: list[tuple[str, Stamp]], progress: Progress | None,
        stop: Callable[[], bool] | None,
    ) -> bool:
        """Index todo a batch at a time, committing about every _COMMIT_CHARS: memory stays
        bounded, and a build cut short keeps what it committed."""
        pending = 0
        done = True
        self._db.execute("BEGIN IMMEDIATE")
        try:
            with contextlib.closing(self._rows(todo)) as rows:
                for start in range(0, len(todo), _BATCH):
                    # Between batches: the one place a build stops (or yields) early.
                    if stop is not None and stop():
                        done = False
                        break
                    batch = list(itertools.islice(rows, _BATCH))
                    pending += _write(self._db, batch, _dictionary(self._db))
                    if pending >= _COMMIT_CHARS:
                        self._db.execute("COMMIT")
                        self._db.execute("BEGIN IMMEDIATE")
                        pending = 0
                    if progress is not None:
                        progress(min(len(todo), start + _BATCH), len(todo))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        if len(todo) >= _SHRINK_WAL_FROM:
            # The WAL keeps the size of the largest transaction (about 80 MB for 10,000 notes)
            # until truncated; a reader still in it just leaves that for a later checkpoint.
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return done


class _transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any error."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")


def _dictionary(db: sqlite3.Connection) -> bytes:
    """The index's packing dictionary (b"" until one is made)."""
    row = db.execute("SELECT value FROM meta WHERE key = 'zdict'").fetchone()
    return bytes(row[0]) if row is not None else b""


def _drop(db: sqlite3.Connection, ids: list[int], zdict: bytes) -> None:
    for start in range(0, len(ids), _BATCH):  # SQLite bounds the parameters of a statement
        some = ids[start : start + _BATCH]
        marks = ",".join("?" * len(some))
        rows = db.execute(f"SELECT id, terms FROM files WHERE id IN ({marks})", some)
        _forget(db, rows, zdict)
        db.executemany("DELETE FROM files WHERE id = ?", [(i,) for i in some])


def _forget(db: sqlite3.Connection, notes: Iterable[tuple[int, bytes]], zdict: bytes) -> None:
    """Take notes, as (id, packed terms), out of the FTS5 table, and drop their vectors."""
    fed = [(rowid, *terms.unpack(packed, zdict)) for rowid, packed in notes]
    db.executemany(
        "INSERT INTO fts(fts, rowid, path, exact, stems) VALUES ('delete', ?, ?, ?, ?)", fed
    )
    db.executemany("DELETE FROM vectors WHERE file_id = ?", [(row[0],) for row in fed])


def _write(db: sqlite3.Connection, rows: list[Row], zdict: bytes) -> int:
    """Index rows in the open transaction; returns the characters written."""
    if not rows:
        return 0
    marks = ",".join("?" * len(rows))
    known = {path: (rowid, packed) for path, rowid, packed in db.execute(
        f"SELECT path, id, terms FROM files WHERE path IN ({marks})", [row[0] for row in rows])}
    # Another process may have indexed some of these since our walk: those are updates, whose
    # old terms and vectors go.
    _forget(db, known.values(), zdict)
    # Ids given here, not one RETURNING per row: the open transaction holds the write lock.
    (top,) = db.execute("SELECT max(id) FROM files").fetchone()
    fresh = itertools.count(max(top or 0, 0) + 1)
    ids = [known[row[0]][0] if row[0] in known else next(fresh) for row in rows]
    db.executemany(
        "INSERT INTO files(id, path, mtime_ns, size, ino, terms) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(id) DO UPDATE SET mtime_ns = excluded.mtime_ns, size = excluded.size, "
        "ino = excluded.ino, terms = excluded.terms",
        [(rowid, rel, *stamp, packed)
         for rowid, (rel, stamp, _, _, _, packed) in zip(ids, rows, strict=True)],
    )
    db.executemany(
        "INSERT INTO fts(rowid, path, exact, stems) VALUES (?, ?, ?, ?)",
        [(rowid, path, exact, stems)
         for rowid, (_, _, path, exact, stems, _) in zip(ids, rows, strict=True)],
    )
    return sum(len(row[3]) + len(row[4]) for row in rows)
