"""The index of one root: its database, kept in step with the files and queried, under a lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from acp_memory.memory.index import vectors
from acp_memory.memory.index.query import TIERS, Candidate, Ranked, broad, rank
from acp_memory.memory.index.schema import open_db
from acp_memory.memory.index.sync import FileSync, Progress
from acp_memory.text.analyze import Query

if TYPE_CHECKING:
    from acp_memory.memory.index.matrix import VectorMatrix


@dataclass
class Lists:
    """What one root's index ranks by words: the tiered ranking a search without vectors
    answers with, and the broad any-word BM25 ranking; each best first."""

    words: Ranked[Candidate]
    broad: list[Candidate]


class RootIndex:
    """The FTS5 index of one root; thread-safe, and safe to share between processes.

    With no db_path the index is kept in memory, for this process only. It is `ready` once
    it has been brought up to date with the files in this process.
    """

    def __init__(self, root: Path, db_path: Path | None) -> None:
        self.root = root
        self.db_path = db_path
        self.ready = False
        self.changes = 0  # notes indexed or dropped since a search last asked for vectors
        self._lock = threading.Lock()
        self._db = open_db(db_path)
        self._sync = FileSync(root, self._db)
        self._matrix: VectorMatrix | None = None  # numpy, at the first search by meaning

    def refresh(self, progress: Progress | None = None, stop: Callable[[], bool] | None = None,
                ) -> bool:
        """Bring the index up to date with the files on disk; False when `stop` cut it short."""
        with self._lock:
            before = self._sync.changes
            done = self._sync.refresh(progress, stop)
            self.changes += self._sync.changes - before
            self.ready = self.ready or done
            return done

    def candidates(self, query: Query, limit: int) -> Ranked[Candidate]:
        """The best notes for the query (see `rank`), as the index holds them now."""
        with self._lock:
            return rank(self._db, query, limit)

    def lists(self, query: Query, depth: int, fusing: bool) -> Lists:
        """The word ranking to `depth`, and when fusing the broad one too."""
        with self._lock:
            words = rank(self._db, query, depth)
            if not fusing:
                return Lists(words, [])
            if all(c.tier == TIERS - 1 for c in words):
                # No note held every word: the ranking is the any-word one already.
                return Lists(words, list(words))
            return Lists(words, broad(self._db, query, depth))

    def nearest(self, key: str, vector: Sequence[float], depth: int) -> list[tuple[str, float]]:
        """The `depth` notes whose vector under key is nearest, as (path, cosine)."""
        with self._lock:
            if self._matrix is None:
                from acp_memory.memory.index.matrix import VectorMatrix

                self._matrix = VectorMatrix()
            near = self._matrix.nearest(self._db, key, vector, depth)
            paths = self._paths([rowid for rowid, _ in near])
            return [(paths[rowid], score) for rowid, score in near if rowid in paths]

    def close_pairs(self, key: str, threshold: float) -> list[tuple[str, str, float]]:
        """The pairs of notes whose vectors under key have a cosine ≥ threshold, as (path,
        path, cosine)."""
        with self._lock:
            if self._matrix is None:
                from acp_memory.memory.index.matrix import VectorMatrix

                self._matrix = VectorMatrix()
            pairs = self._matrix.close_pairs(self._db, key, threshold)
            ids = sorted({i for a, b, _ in pairs for i in (a, b)})
            paths: dict[int, str] = {}
            for start in range(0, len(ids), 500):  # within SQLite's bound on variables
                paths.update(self._paths(ids[start:start + 500]))
            return [(paths[a], paths[b], score) for a, b, score in pairs
                    if a in paths and b in paths]

    def pending_vectors(self, key: str, limit: int) -> list[vectors.Pending]:
        """Notes with no vector under key yet."""
        with self._lock:
            return vectors.pending(self._db, key, limit)

    def store_vectors(
        self, key: str, notes: Sequence[vectors.Pending], found: Sequence[Sequence[float]]
    ) -> int:
        """Keep the vectors of notes unchanged since they were listed; how many were kept."""
        with self._lock:
            return vectors.store(self._db, key, notes, found)

    def close(self) -> None:
        """Close the database and stop watching the root."""
        with self._lock:
            self._sync.close()
            self._db.close()

    def _paths(self, ids: list[int]) -> dict[int, str]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self._db.execute(f"SELECT id, path FROM files WHERE id IN ({marks})", ids)
        return dict(rows)
