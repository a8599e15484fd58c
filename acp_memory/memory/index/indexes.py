"""The open search indexes of one cache folder: the most recently used ones only.

An open index holds a SQLite connection and an inotify descriptor with a watch per folder of
its root, so `SearchIndexes` keeps at most `max_roots` open and closes the rest. When the cache
folder cannot be written (a read-only home), the indexes live in memory instead.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from acp_memory.llm.embeddings import Embeddings
from acp_memory.memory.index.query import Candidate, Ranked
from acp_memory.memory.index.root import Lists, RootIndex
from acp_memory.memory.index.schema import db_path_for
from acp_memory.memory.index.sync import Progress
from acp_memory.memory.index.vectors import Pending, VectorShare
from acp_memory.text.analyze import Query

log = logging.getLogger(__name__)

DEFAULT_MAX_ROOTS = 16  # memory.index_max_roots


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

    With `background` set (an `IndexKeeper` sets it), an index not yet in step with its files
    is brought up to date there, never in a search, which gets None and scans the files.
    """

    def __init__(
        self,
        cache_dir: Path,
        max_roots: int = DEFAULT_MAX_ROOTS,
        embeddings: Embeddings | None = None,
    ) -> None:
        if max_roots < 1:
            raise ValueError("max_roots must be at least 1")
        self.cache_dir = cache_dir
        self.max_roots = max_roots
        self.embeddings = embeddings
        # Brings a root up to date in the background; False when it cannot (no event loop).
        self.background: Callable[[Path], bool] | None = None
        # Roots whose last embedding pass failed: notes there wait for their vectors.
        self.vectors_behind: set[Path] = set()
        # Roots whose vectors are shared with other processes (absolute path -> the share).
        self.shared_vectors: dict[Path, VectorShare] = {}
        self._lock = threading.Lock()
        self._open: OrderedDict[Path, _Open] = OrderedDict()
        self._in_memory = False  # the cache folder proved unusable: said once, then in memory

    def candidates(self, root: Path, query: Query, limit: int) -> Ranked[Candidate]:
        """Bring the index of root up to date with its files, then query it."""
        with self._up_to_date(root) as index:
            return index.candidates(query, limit)

    def lists(self, root: Path, query: Query, depth: int) -> Lists | None:
        """The word rankings of root's notes to `depth` (the broad one only with embeddings),
        the index first brought up to date with the files; None while that is being done in
        the background."""
        with self._lease(root) as index:
            if not index.ready and self.background is not None and self.background(root):
                return None
        with self._up_to_date(root) as index:
            if index.changes and self.embeddings and self.background is not None:
                index.changes = 0
                self.background(root)  # notes changed: their new vectors are made there
            return index.lists(query, depth, fusing=self.embeddings is not None)

    def nearest(self, root: Path, vector: Sequence[float], depth: int) -> list[tuple[str, float]]:
        """The notes of root whose vectors are nearest to vector, as (path, cosine)."""
        assert self.embeddings is not None
        if root.absolute() in self.vectors_behind and self.background is not None:
            self.background(root)  # the provider answers again: the notes it failed get theirs
        with self._lease(root) as index:
            return index.nearest(self.embeddings.key, vector, depth)

    def close_pairs(self, root: Path, threshold: float) -> list[tuple[str, str, float]]:
        """The pairs of root's notes whose vectors have a cosine ≥ threshold, as (path, path,
        cosine); none without embeddings or before the notes have vectors."""
        if self.embeddings is None:
            return []
        with self._lease(root) as index:
            return index.close_pairs(self.embeddings.key, threshold)

    def notes_changed(self, root: Path) -> None:
        """A store wrote in root: with embeddings, the keeper re-indexes the note and makes its
        vector now, not at the next search."""
        if self.embeddings is not None and self.background is not None:
            self.background(root)

    def ready(self, root: Path) -> bool:
        """Whether root's open index is in step with its files (a search may use it)."""
        with self._lock:
            entry = self._open.get(root.absolute())
            return entry is not None and entry.index.ready

    def build(
        self, root: Path, progress: Progress | None = None, stop: Callable[[], bool] | None = None
    ) -> bool:
        """Bring root's index up to date with its files; False when `stop` cut it short."""
        with self._up_to_date(root, progress, stop) as index:
            return index.ready

    def pending_vectors(self, root: Path, limit: int) -> list[Pending]:
        """Notes of root with no vector of the configured model yet."""
        assert self.embeddings is not None
        with self._lease(root) as index:
            return index.pending_vectors(self.embeddings.key, limit)

    def store_vectors(
        self, root: Path, notes: Sequence[Pending], found: Sequence[Sequence[float]]
    ) -> int:
        """Keep the vectors of notes unchanged since they were listed; how many were kept."""
        assert self.embeddings is not None
        with self._lease(root) as index:
            return index.store_vectors(self.embeddings.key, notes, found)

    def close(self) -> None:
        """Close every index; one in use closes when its search ends."""
        with self._lock:
            victims = [self._retire_locked(entry) for entry in self._open.values()]
            self._open.clear()
        _close_all(victims)

    @contextlib.contextmanager
    def _up_to_date(
        self, root: Path, progress: Progress | None = None, stop: Callable[[], bool] | None = None
    ) -> Iterator[RootIndex]:
        """Root's index leased and brought up to date (in memory if the cache stops writing)."""
        with self._lease(root) as index:
            try:
                index.refresh(progress, stop)
            except sqlite3.OperationalError as exc:
                if index.db_path is None:
                    raise
                # The cache folder stopped taking writes (remounted read-only, disk full).
                self._use_memory(exc)
                self._retire(root, index)
            else:
                yield index
                return
        with self._up_to_date(root, progress, stop) as fresh:
            yield fresh

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
