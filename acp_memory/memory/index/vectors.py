"""Note vectors beside the words: float32 rows in the index file, searched by cosine.

A vector is stored under its model's key (model and dimensions), so one from another model is
never compared, and only for the note text it was made from: re-indexing a note drops its
vectors, and a vector made from text that changed meanwhile is not written.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from acp_memory.memory.index.files import Stamp

Matrix = npt.NDArray[np.float32]
# A note waiting for its vector: (file id, path relative to the root, stamp when listed).
Pending = tuple[int, str, Stamp]


def unit(vector: Sequence[float]) -> Matrix:
    """The vector scaled to length 1, as float32 (cosine is then a dot product)."""
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


def pending(db: sqlite3.Connection, key: str, limit: int) -> list[Pending]:
    """Notes with no vector under key, oldest first."""
    rows = db.execute(
        "SELECT f.id, f.path, f.mtime_ns, f.size, f.ino FROM files f WHERE NOT EXISTS "
        "(SELECT 1 FROM vectors v WHERE v.file_id = f.id AND v.model = ?) ORDER BY f.id LIMIT ?",
        (key, limit),
    )
    return [(rowid, path, (mtime, size, ino)) for rowid, path, mtime, size, ino in rows]


def store(
    db: sqlite3.Connection, key: str, notes: Sequence[Pending], vectors: Sequence[Sequence[float]]
) -> int:
    """Write the vectors of notes whose stamp is still the one listed; how many were written."""
    before = db.total_changes
    db.execute("BEGIN IMMEDIATE")
    try:
        db.executemany(
            "INSERT OR REPLACE INTO vectors(file_id, model, vec) SELECT ?, ?, ? WHERE EXISTS "
            "(SELECT 1 FROM files WHERE id = ? AND mtime_ns = ? AND size = ? AND ino = ?)",
            [(rowid, key, unit(vector).astype("<f4").tobytes(), rowid, *stamp)
             for (rowid, _, stamp), vector in zip(notes, vectors, strict=True)],
        )
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return db.total_changes - before


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
