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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from acp_memory.memory.index.query import Candidate, Ranked
from acp_memory.memory.index.root import RootIndex
from acp_memory.memory.index.schema import db_path_for
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
    """

    def __init__(self, cache_dir: Path, max_roots: int = DEFAULT_MAX_ROOTS) -> None:
        if max_roots < 1:
            raise ValueError("max_roots must be at least 1")
        self.cache_dir = cache_dir
        self.max_roots = max_roots
        self._lock = threading.Lock()
        self._open: OrderedDict[Path, _Open] = OrderedDict()
        self._in_memory = False  # the cache folder proved unusable: said once, then in memory

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
