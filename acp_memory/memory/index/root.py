"""The index of one root: its database, kept in step with the files and queried, under a lock."""

from __future__ import annotations

import threading
from pathlib import Path

from acp_memory.memory.index.query import Candidate, Ranked, rank
from acp_memory.memory.index.schema import open_db
from acp_memory.memory.index.sync import FileSync
from acp_memory.text.analyze import Query


class RootIndex:
    """The FTS5 index of one root; thread-safe, and safe to share between processes.

    With no db_path the index is kept in memory, for this process only.
    """

    def __init__(self, root: Path, db_path: Path | None) -> None:
        self.root = root
        self.db_path = db_path
        self._lock = threading.Lock()
        self._db = open_db(db_path)
        self._sync = FileSync(root, self._db)

    def refresh(self) -> None:
        """Bring the index up to date with the files on disk."""
        with self._lock:
            self._sync.refresh()

    def candidates(self, query: Query, limit: int) -> Ranked[Candidate]:
        """The best notes for the query (see `rank`), as the index holds them now."""
        with self._lock:
            return rank(self._db, query, limit)

    def close(self) -> None:
        """Close the database and stop watching the root."""
        with self._lock:
            self._sync.close()
            self._db.close()
