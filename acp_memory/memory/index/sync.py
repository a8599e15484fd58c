"""Keeping an index in step with the files, which are the source of truth.

The first refresh walks the root comparing stamps (mtime, size, inode) per note and indexes
what changed, so a root edited while no agent ran is brought up to date, not rebuilt; later
refreshes re-index only the files inotify reported. Without inotify (not Linux, or out of
watches) every refresh walks the tree, which is slower but just as correct.

Many notes are indexed a batch at a time, committed about every 32 MB, so memory stays bounded
and a build cut short keeps what it committed. (A writer thread feeding SQLite while this one
analysed the next batch gained nothing measurable on two cores: each half slowed the other.)
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from acp_memory.memory.index.files import Stamp, read_note, stamp_of, walk_notes
from acp_memory.memory.roots import is_note_name
from acp_memory.memory.watch import Watcher
from acp_memory.text.analyze import analyze, document_terms, tokens

log = logging.getLogger(__name__)

# (notes done, notes to do): called as indexing goes, from the thread that asked for it.
Progress = Callable[[int, int], None]
# Notes analysed and written at a time, and the text a transaction takes before commit: each
# commit flushes FTS5's pending terms as a segment, so fewer, larger ones build faster.
_BATCH = 256
_COMMIT_CHARS = 32 << 20
_SHRINK_WAL_FROM = 4 * _BATCH  # notes written by one update


def path_terms(rel: str) -> str:
    """The path column: exact forms and stems of the words in a note's relative path."""
    stem_of_path = rel.rsplit(".", 1)[0]
    out: list[str] = []
    for token in tokens(stem_of_path):
        a = analyze(token)
        out.extend((a.whole, *a.stems))
    return " ".join(out)


# A note ready for the writer: (path, stamp, path column, exact column, stems column).
Row = tuple[str, Stamp, str, str, str]


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
                _drop(self._db, gone)
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

    def _rows(self, todo: Iterable[tuple[str, Stamp]]) -> Iterator[Row]:
        for rel, stamp in todo:
            text = read_note(self.root, rel)
            if text is not None:
                yield (rel, stamp, path_terms(rel), *document_terms(text))

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
            for start in range(0, len(todo), _BATCH):
                if stop is not None and stop():
                    done = False
                    break
                pending += _write(self._db, self._rows(todo[start : start + _BATCH]))
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


def _drop(db: sqlite3.Connection, ids: list[int]) -> None:
    params = [(i,) for i in ids]
    db.executemany("DELETE FROM files WHERE id = ?", params)
    db.executemany("DELETE FROM fts WHERE rowid = ?", params)
    db.executemany("DELETE FROM vectors WHERE file_id = ?", params)


def _write(db: sqlite3.Connection, rows: Iterable[Row]) -> int:
    """Index rows in the open transaction; returns the characters written."""
    chars = 0
    fts_rows = []
    for rel, stamp, path_column, exact, stems in rows:
        # An upsert: another process may have indexed this path since our walk.
        (rowid,) = db.execute(
            "INSERT INTO files(path, mtime_ns, size, ino) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(path) DO UPDATE SET mtime_ns = excluded.mtime_ns, "
            "size = excluded.size, ino = excluded.ino RETURNING id",
            (rel, *stamp),
        ).fetchone()
        fts_rows.append((rowid, path_column, exact, stems))
        chars += len(exact) + len(stems)
    ids = [(row[0],) for row in fts_rows]
    db.executemany("DELETE FROM fts WHERE rowid = ?", ids)
    db.executemany("DELETE FROM vectors WHERE file_id = ?", ids)  # its text changed
    db.executemany("INSERT INTO fts(rowid, path, exact, stems) VALUES (?, ?, ?, ?)", fts_rows)
    return chars
