"""The search index of one root: SQLite FTS5 (BM25) in the cache folder, in step with the files.

The files are the source of truth. Each search first brings the index up to date: a full walk
comparing (mtime, size, inode) per note the first time, then only the files that inotify reported.
Without inotify (not Linux) every search walks the tree, which is slower but just as correct.
When the cache folder cannot be written (a read-only home), the index lives in memory instead.

An open index holds a SQLite connection and an inotify descriptor with a watch per folder of
its root: `SearchIndexes` keeps only the most recently used ones open and closes the rest.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

from acp_memory.memory.roots import is_note_name
from acp_memory.memory.watch import Watcher
from acp_memory.paths import resolves_inside
from acp_memory.text.analyze import Query, analyze, document_terms, tokens

log = logging.getLogger(__name__)

SCHEMA_VERSION = 4
DEFAULT_MAX_ROOTS = 16  # memory.index_max_roots
# FTS5's IDF is clamped to ~0 for a word in half the notes or more, which flattens every score
# in a small collection; empty padding rows keep IDF positive and matter little in large ones.
_PADDING_ROWS = 16
# BM25 column weights: a word in the path (the title) says more than one in the body;
# an exact word form more than a shared stem.
_WEIGHTS = "bm25(fts, 4.0, 2.0, 1.0)"
_SCHEMA = """
CREATE TABLE files(id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL,
                   mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, ino INTEGER NOT NULL);
CREATE VIRTUAL TABLE fts USING fts5(path, exact, stems,
                                    tokenize="unicode61 remove_diacritics 0 tokenchars '_'");
"""

Stat = tuple[int, int, int]
T = TypeVar("T")


class Ranked(list[T]):
    """Results best first, and `total`: how many matched before a limit cut the list."""

    def __init__(self, items: Iterable[T] = (), total: int = 0) -> None:
        super().__init__(items)
        self.total = max(total, len(self))


@dataclass(frozen=True)
class Candidate:
    """A matching note: path relative to the root, BM25 score, and tier (0 ranks first)."""

    rel: str
    score: float
    tier: int


def db_path_for(root: Path, cache_dir: Path) -> Path:
    """The index file of a root, named by a hash of the root's real path."""
    digest = hashlib.sha256(str(root.resolve()).encode("utf-8")).hexdigest()[:20]
    return cache_dir / "search" / f"{digest}.sqlite3"


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def path_terms(rel: str) -> str:
    """The path column: exact forms and stems of the words in a note's relative path."""
    stem_of_path = rel.rsplit(".", 1)[0]
    out: list[str] = []
    for token in tokens(stem_of_path):
        a = analyze(token)
        out.extend((a.whole, *a.stems))
    return " ".join(out)


TIERS = 3  # an exact identifier, every query word, any query word


class RootIndex:
    """The FTS5 index of one root; thread-safe, and safe to share between processes.

    With no db_path the index is kept in memory, for this process only.
    """

    def __init__(self, root: Path, db_path: Path | None) -> None:
        self.root = root
        self.db_path = db_path
        self._lock = threading.Lock()
        self._watcher: Watcher | None = None
        self._synced = False
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        if self.db_path is None:
            return self._connect(":memory:")
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return self._connect(self.db_path)
        except sqlite3.OperationalError:
            raise  # cannot open or write it (read-only, locked): not a damaged file
        except sqlite3.DatabaseError:
            # A cache that cannot be read is rebuilt, never repaired.
            log.warning("search index %s is unreadable; rebuilding it", self.db_path)
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.db_path}{suffix}")
            return self._connect(self.db_path)

    def _connect(self, where: Path | str) -> sqlite3.Connection:
        db = sqlite3.connect(where, timeout=30, isolation_level=None, check_same_thread=False)
        try:
            self._prepare(db)
        except BaseException:
            db.close()
            raise
        return db

    @staticmethod
    def _prepare(db: sqlite3.Connection) -> None:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                db.execute("DROP TABLE IF EXISTS files")
                db.execute("DROP TABLE IF EXISTS fts")
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        db.execute(stmt)
                db.executemany(
                    "INSERT INTO fts(rowid, path, exact, stems) VALUES (?, '', '', '')",
                    [(-n,) for n in range(1, _PADDING_ROWS + 1)],
                )
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        with self._lock:
            if self._watcher is not None:
                self._watcher.close()
                self._watcher = None
            self._synced = False
            self._db.close()

    # -- keeping up with the files ---------------------------------------------------------

    def refresh(self) -> None:
        """Bring the index up to date with the files on disk."""
        with self._lock:
            if self._synced and self._watcher is not None:
                changes = self._watcher.drain()
                if not changes.rescan:
                    if changes.files:
                        stats = {rel: self._stat(rel) for rel in changes.files}
                        self._apply(stats, forced=changes.files)
                    return
            self._full_sync()

    def _full_sync(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
        self._watcher = None
        self._synced = False
        watcher: Watcher | None
        try:
            watcher = Watcher() if self.root.is_dir() else None
        except OSError:
            watcher = None
        try:
            seen = dict(self._walk(watcher))
        except OSError as exc:
            # Out of inotify watches, most likely: fall back to a walk on every search.
            log.info("search index for %s runs without change notification: %s", self.root, exc)
            if watcher is not None:
                watcher.close()
            watcher = None
            seen = dict(self._walk(None))
        known = {row[0] for row in self._db.execute("SELECT path FROM files")}
        updates: dict[str, Stat | None] = dict(seen)
        updates.update({rel: None for rel in known - seen.keys()})
        self._apply(updates, forced=set())
        self._watcher = watcher
        self._synced = watcher is not None

    def _walk(self, watcher: Watcher | None) -> Iterator[tuple[str, Stat]]:
        real_root = self.root.resolve()
        stack = [(str(self.root), "")]
        while stack:
            folder, rel = stack.pop()
            if watcher is not None:
                watcher.add(folder, rel)  # before listing, so nothing slips between the two
            try:
                it = os.scandir(folder)
            except OSError:
                continue
            with it:
                for entry in it:
                    if entry.name.startswith("."):
                        continue
                    child = f"{rel}/{entry.name}" if rel else entry.name
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append((entry.path, child))
                        elif is_note_name(entry.name) and entry.is_file():
                            if entry.is_symlink() and not resolves_inside(entry.path, real_root):
                                continue
                            st = entry.stat()
                            yield child, (st.st_mtime_ns, st.st_size, st.st_ino)
                    except OSError:
                        continue

    def _stat(self, rel: str) -> Stat | None:
        path = self.root / rel
        try:
            if path.is_symlink() and not resolves_inside(path, self.root.resolve()):
                return None
            st = path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino) if path.is_file() else None

    def _apply(self, updates: dict[str, Stat | None], forced: set[str]) -> None:
        """Re-index changed notes and drop vanished ones, in one transaction."""
        if not updates:
            return
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for rel, stat in updates.items():
                row = db.execute(
                    "SELECT id, mtime_ns, size, ino FROM files WHERE path = ?", (rel,)
                ).fetchone()
                if stat is None or not is_note_name(rel.rsplit("/", 1)[-1]):
                    if row is not None:
                        db.execute("DELETE FROM files WHERE id = ?", (row[0],))
                        db.execute("DELETE FROM fts WHERE rowid = ?", (row[0],))
                    continue
                if row is not None and tuple(row[1:]) == stat and rel not in forced:
                    continue
                self._index_file(db, rel, stat, row[0] if row else None)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _index_file(self, db: sqlite3.Connection, rel: str, stat: Stat, rowid: int | None) -> None:
        try:
            text = (self.root / rel).read_bytes().decode("utf-8", errors="replace")
        except OSError:
            return
        exact, stems = document_terms(text)
        if rowid is None:
            rowid = db.execute(
                "INSERT INTO files(path, mtime_ns, size, ino) VALUES (?, ?, ?, ?)", (rel, *stat)
            ).lastrowid
        else:
            db.execute(
                "UPDATE files SET mtime_ns = ?, size = ?, ino = ? WHERE id = ?", (*stat, rowid)
            )
            db.execute("DELETE FROM fts WHERE rowid = ?", (rowid,))
        db.execute(
            "INSERT INTO fts(rowid, path, exact, stems) VALUES (?, ?, ?, ?)",
            (rowid, path_terms(rel), exact, stems),
        )

    # -- querying ---------------------------------------------------------------------------

    def candidates(self, query: Query, limit: int) -> Ranked[Candidate]:
        """The best notes of the first tier that has any (exact identifier, every word, any
        word), and how many notes that tier matched in all."""
        any_word = "(" + " OR ".join(map(_quote, query.terms)) + ")"
        # Each tier is one MATCH expression over the same phrases, so BM25 scores stay
        # comparable; AND lets FTS5 intersect posting lists instead of scoring every match.
        tiers = [any_word]
        if len(query.groups) > 1:
            tiers.insert(0, " AND ".join(
                "(" + " OR ".join(map(_quote, group)) + ")" for group in query.groups
            ))
        if query.identifiers:
            exact = "{path exact} : (" + " OR ".join(map(_quote, query.identifiers)) + ")"
            tiers.insert(0, f"{any_word} AND {exact}")
        sql = (
            f"SELECT f.path, -{_WEIGHTS} FROM fts JOIN files f ON f.id = fts.rowid "
            f"WHERE fts MATCH ? ORDER BY {_WEIGHTS} LIMIT ?"
        )
        count = "SELECT count(*) FROM fts JOIN files f ON f.id = fts.rowid WHERE fts MATCH ?"
        # Tier numbers: 0 exact identifier, 1 every word, 2 any word (absent tiers skipped).
        numbers = [t for t, present in enumerate([bool(query.identifiers),
                                                   len(query.groups) > 1, True]) if present]
        found: dict[str, Candidate] = {}
        total = 0
        with self._lock:
            for tier, expression in zip(numbers, tiers, strict=True):
                for path, score in self._db.execute(sql, (expression, limit)):
                    found.setdefault(path, Candidate(path, score, tier))
                if found:
                    # Like a web search engine: notes holding every word (or the identifier)
                    # answer the query; any-word matches are the fallback when none do.
                    # Scoring every partial match is also the slow part (bench/search.py).
                    total = len(found)
                    if total >= limit:  # cut by the limit: count the rest, without scoring
                        (total,) = self._db.execute(count, (expression,)).fetchone()
                    break
        best = sorted(found.values(), key=lambda c: (c.tier, -c.score, c.rel))[:limit]
        return Ranked(best, total)


@dataclass
class _Open:
    index: RootIndex
    users: int = 0
    retired: bool = False  # evicted or closed: closed as soon as no search uses it


class ClosedOnExit:
    """`with thing:` closes it at the end of the block."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SearchIndexes(ClosedOnExit):
    """The search indexes of one cache folder, at most `max_roots` of them open at a time.

    Opening a root's index past the limit closes the least recently used one (its SQLite
    connection and its inotify descriptor); an index a search is using is closed when that
    search ends. Reopening one later costs a walk comparing stat results, not a rebuild.
    Thread-safe; share one between stores of the same cache folder, and `close()` it at
    shutdown (a later search opens what it needs again).
    """

    def __init__(self, cache_dir: Path, max_roots: int = DEFAULT_MAX_ROOTS) -> None:
        if max_roots < 1:
            raise ValueError("max_roots must be at least 1")
        self.cache_dir = cache_dir
        self.max_roots = max_roots
        self._lock = threading.Lock()
        self._open: OrderedDict[Path, _Open] = OrderedDict()
        self._in_memory = False  # the cache folder proved unusable: said once, then in memory

    def open_roots(self) -> list[Path]:
        """The roots whose index is open, least recently used first."""
        with self._lock:
            return list(self._open)

    def candidates(self, root: Path, query: Query, limit: int) -> Ranked[Candidate]:
        """Bring the index of root up to date with its files, then query it."""
        with self._lease(root) as index:
            try:
                index.refresh()
            except sqlite3.OperationalError as exc:
                if index.db_path is None:
                    raise
                # The cache folder stopped taking writes (remounted read-only, disk full).
                self._use_memory(exc)
                self._retire(root, index)
                return self.candidates(root, query, limit)
            return index.candidates(query, limit)

    def close(self) -> None:
        """Close every index; one in use closes when its search ends."""
        with self._lock:
            victims = [self._retire_locked(entry) for entry in self._open.values()]
            self._open.clear()
        _close_all(victims)

    # -- leases ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _lease(self, root: Path) -> Iterator[RootIndex]:
        key = root.absolute()
        with self._lock:
            entry = self._open.get(key)
            if entry is None:
                entry = self._open[key] = _Open(self._new_index(key))
            self._open.move_to_end(key)
            entry.users += 1
            victims = self._evict_locked()
        _close_all(victims)  # a checkpoint and close take milliseconds: not under the lock
        try:
            yield entry.index
        finally:
            with self._lock:
                entry.users -= 1
                victims = [entry.index] if entry.retired and entry.users == 0 else []
                victims += self._evict_locked()
            _close_all(victims)

    def _new_index(self, root: Path) -> RootIndex:
        if not self._in_memory:
            try:
                return RootIndex(root, db_path_for(root, self.cache_dir))
            except (OSError, sqlite3.OperationalError) as exc:
                self._use_memory(exc)
        return RootIndex(root, None)

    def _use_memory(self, exc: Exception) -> None:
        if not self._in_memory:
            self._in_memory = True
            log.warning(
                "search index: cannot write %s (%s); this process keeps its search index in "
                "memory and builds it again on its first search of each folder",
                self.cache_dir / "search", getattr(exc, "strerror", None) or exc,
            )

    def _retire(self, root: Path, index: RootIndex) -> None:
        key = root.absolute()
        with self._lock:
            entry = self._open.get(key)
            if entry is not None and entry.index is index:
                del self._open[key]
                self._retire_locked(entry)

    def _evict_locked(self) -> list[RootIndex | None]:
        # Least recently used first, never the most recent. One in use stays open, over the
        # limit, until its search ends: the limit holds again once searches finish.
        victims: list[RootIndex | None] = []
        for key in list(self._open)[:-1]:
            if len(self._open) <= self.max_roots:
                break
            entry = self._open[key]
            if entry.users == 0:
                del self._open[key]
                victims.append(self._retire_locked(entry))
        return victims

    @staticmethod
    def _retire_locked(entry: _Open) -> RootIndex | None:
        """Mark an entry retired; the index to close now, or None while a search uses it."""
        entry.retired = True
        return entry.index if entry.users == 0 else None


def _close_all(indexes: list[RootIndex | None]) -> None:
    for index in indexes:
        if index is not None:
            index.close()
