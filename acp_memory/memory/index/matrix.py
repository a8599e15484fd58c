"""One model's note vectors as a numpy matrix in memory, searched by cosine.

Its own module so that numpy, a tenth of a second to import, loads only where embeddings are on.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


def unit(vector: Sequence[float]) -> Matrix:
    """The vector scaled to length 1, as float32 (cosine is then a dot product)."""
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


class VectorMatrix:
    """One model's vectors of an index as a matrix in memory, kept in step with the index:
    once it changed (a write by this connection or a commit by another), the rows gone are
    dropped and the new ones read, never the whole matrix again (`seq` only grows)."""

    def __init__(self) -> None:
        self._version: tuple[object, ...] | None = None
        self._kind: tuple[str, int] | None = None  # the key and dimensions loaded
        self._seqs: npt.NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._ids: npt.NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._matrix: Matrix = np.empty((0, 0), dtype=np.float32)

    def nearest(
        self, db: sqlite3.Connection, key: str, query: Sequence[float], depth: int
    ) -> list[tuple[int, float]]:
        """The `depth` notes nearest to query as (file id, cosine), nearest first."""
        version = (key, len(query), db.total_changes,
                   db.execute("PRAGMA data_version").fetchone()[0])
        if version != self._version:
            self._catch_up(db, key, len(query))
            self._version = version
        count = len(self._ids)
        if count == 0 or depth < 1:
            return []
        # einsum, not BLAS: a matrix-vector product gains nothing from BLAS threads, which
        # spin for milliseconds when the other core is busy.
        scores = np.einsum("ij,j->i", self._matrix, unit(query))
        k = min(depth, count)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(self._ids[i]), float(scores[i])) for i in top]

    def close_pairs(
        self, db: sqlite3.Connection, key: str, threshold: float, rows: int = 1024
    ) -> list[tuple[int, int, float]]:
        """Every pair of notes whose vectors under key have a cosine ≥ threshold, as (file id,
        file id, cosine), the smaller id first; `rows` notes at a time against all of them,
        so memory stays at rows × notes floats."""
        found = db.execute("SELECT length(vec) FROM vectors WHERE model = ? LIMIT 1",
                           (key,)).fetchone()
        if found is None:
            return []
        dimensions = found[0] // 4
        version = (key, dimensions, db.total_changes,
                   db.execute("PRAGMA data_version").fetchone()[0])
        if version != self._version:
            self._catch_up(db, key, dimensions)
            self._version = version
        pairs: list[tuple[int, int, float]] = []
        for start in range(0, len(self._ids), rows):
            # A matrix product, unlike `nearest`'s matrix-vector one, is what BLAS is for.
            scores = self._matrix[start:start + rows] @ self._matrix.T
            for i, j in zip(*np.nonzero(scores >= threshold), strict=True):
                a, b = int(self._ids[start + i]), int(self._ids[j])
                if a < b:
                    pairs.append((a, b, float(scores[i, j])))
        return pairs

    def _catch_up(self, db: sqlite3.Connection, key: str, dimensions: int) -> None:
        size = dimensions * 4
        if self._kind != (key, dimensions):
            self._kind = (key, dimensions)
            self._seqs, self._ids = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
            self._matrix = np.empty((0, dimensions), dtype=np.float32)
        elif len(self._seqs):
            # From the (model, seq) index alone: no vector is read to learn which are left.
            alive = np.fromiter(
                (seq for (seq,) in db.execute("SELECT seq FROM vectors WHERE model = ?", (key,))),
                dtype=np.int64,
            )
            kept = np.isin(self._seqs, alive, assume_unique=True)
            if not kept.all():
                self._seqs, self._ids, self._matrix = (
                    self._seqs[kept], self._ids[kept], self._matrix[kept])
        last = int(self._seqs.max()) if len(self._seqs) else 0
        query = ("SELECT seq, file_id, vec FROM vectors WHERE model = ? AND seq > ? AND "
                 "length(vec) = ? ORDER BY seq")
        if not len(self._seqs):
            self._load(db.execute(query, (key, last, size)), db.execute(
                f"SELECT count(*) FROM ({query})", (key, last, size)).fetchone()[0], dimensions)
            return
        rows = db.execute(query, (key, last, size)).fetchall()
        if rows:
            seqs = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
            ids = np.fromiter((row[1] for row in rows), dtype=np.int64, count=len(rows))
            added = np.frombuffer(b"".join(row[2] for row in rows), dtype="<f4")
            self._seqs = np.concatenate([self._seqs, seqs])
            self._ids = np.concatenate([self._ids, ids])
            self._matrix = np.concatenate([self._matrix, added.reshape(len(rows), dimensions)])

    def _load(self, rows: Iterable[tuple[int, int, bytes]], count: int, dimensions: int) -> None:
        """Every row into a matrix allocated once (a copy of 100,000 blobs would double it)."""
        seqs = np.empty(count, dtype=np.int64)
        ids = np.empty(count, dtype=np.int64)
        matrix = np.empty((count, dimensions), dtype=np.float32)
        n = 0
        for seq, rowid, blob in rows:
            if n == count:
                break  # added since the count: the next catch-up reads them
            seqs[n], ids[n] = seq, rowid
            matrix[n] = np.frombuffer(blob, dtype="<f4")
            n += 1
        self._seqs, self._ids, self._matrix = seqs[:n], ids[:n], matrix[:n]
