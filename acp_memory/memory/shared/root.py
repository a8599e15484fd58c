"""A shared project root as this process holds it: the key, its database, its local copy and
its journal, one per (DSN, key) per process (`shared_root_for`), so that every session and
store of the process on the same repository reads and writes one copy.

To the store it is a disk root at `root` (the local copy's folder); `refresh` keeps that copy
caught up before reads, bounded to a catch-up a second unless a NOTIFY (`poke`) says a change
is waiting, and says when the server could not be reached: the reads answer from the copy, with
the time it was last in step.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from acp_memory.config import Config, Paths
from acp_memory.memory.index.indexes import SearchIndexes
from acp_memory.memory.rootlock import RootBusy
from acp_memory.memory.shared.copy import LocalCopy
from acp_memory.memory.shared.database import (
    Database,
    SharedUnavailable,
    database_for,
)
from acp_memory.memory.shared.database import close_all as close_databases
from acp_memory.memory.shared.journal import SharedJournal
from acp_memory.memory.shared.vectors import share_vectors
from acp_memory.timestamps import parse_iso

log = logging.getLogger(__name__)

REFRESH_SECONDS = 1.0  # at most one catch-up this often, unless poked


@dataclass
class SharedRoot:
    """One key's shared root in this process (see the module's docstring)."""

    key: str
    database: Database
    copy: LocalCopy
    journal: SharedJournal
    clock: Callable[[], float] = time.monotonic
    _last: float | None = field(default=None, init=False, repr=False)
    _poked: bool = field(default=False, init=False, repr=False)
    _offline: str | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def root(self) -> Path:
        """The local copy's root: the folder the store, the index and the scan use."""
        return self.copy.root

    def refresh(self) -> str | None:
        """Catch the copy up (at most once a second unless poked); None when it is current,
        else the offline marker 'shared memory offline: synced <time>'."""
        # Held across the catch-up: a read that waits for another thread's catch-up sees
        # what it brought, rather than skipping it as too recent.
        with self._lock:
            now = self.clock()
            if (not self._poked and self._last is not None
                    and now - self._last < REFRESH_SECONDS):
                return self._offline
            self._poked, self._last = False, now
            try:
                with self.database.connection() as conn:
                    self.copy.catch_up(conn)
            except SharedUnavailable as exc:  # a schema too new included
                log.debug("%s", exc)  # the session's one line says it; reads go on offline
                self._offline = self.offline_text()
            except psycopg.Error as exc:
                log.warning("shared project memory %s: cannot catch up: %s", self.database.masked,
                            " ".join(str(exc).split()))
                self._offline = self.offline_text()
            except RootBusy:
                pass  # a writer holds the copy, and catches it up itself
            except OSError as exc:
                log.warning("shared project memory %s: cannot update the local copy %s: %s",
                            self.key, self.copy.folder, exc)
            else:
                self._offline = None
            return self._offline

    def poke(self) -> None:
        """A NOTIFY arrived: the next refresh catches up at once."""
        self._poked = True

    def share_vectors(self, indexes: SearchIndexes) -> None:
        """Let the keeper of `indexes` take and give this root's vectors through the
        server's embeddings table (when embeddings are on)."""
        share_vectors(indexes, self.root, self.database, self.key)

    def offline_text(self) -> str:
        """'shared memory offline: synced <when the copy was last caught up, or never>'."""
        return f"shared memory offline: synced {_when(self.copy.synced_at())}"


def _when(stamp: str | None) -> str:
    """An ISO stamp as people read it, to the second: `2026-12-07 09:12:03 UTC`."""
    if stamp is None:
        return "never"
    try:
        return parse_iso(stamp).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return "never"


_roots: dict[tuple[str, str, Path], SharedRoot] = {}
_registry_lock = threading.Lock()


def shared_root_for(cfg: Config, paths: Paths, key: str) -> SharedRoot:
    """The process's SharedRoot for (memory.shared.dsn, key) under this home's cache; DsnError
    when the DSN does not parse."""
    dsn = cfg.memory.shared.dsn
    where = (dsn, key, paths.cache_dir)
    with _registry_lock:
        found = _roots.get(where)
        if found is None:
            database = database_for(dsn)
            copy = LocalCopy(paths.cache_dir, key)
            journal = SharedJournal(database, key, copy, cfg.memory.history_days,
                                    cfg.memory.pending_days)
            found = _roots[where] = SharedRoot(key, database, copy, journal)
        return found


def close_all() -> None:
    """Close every shared root of the process and their databases (at exit, between tests)."""
    with _registry_lock:
        roots = list(_roots.values())
        _roots.clear()
    for root in roots:
        root.journal.close()
    close_databases()
