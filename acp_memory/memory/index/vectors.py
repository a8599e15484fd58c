"""Note vectors beside the words: float32 rows in the index file, searched by cosine.

A vector is stored under its model's key (model and dimensions), so one from another model is
never compared, and only for the note text it was made from: re-indexing a note drops its
vectors, and a vector made from text that changed meanwhile is not written. Searching them is
`matrix.py`'s (numpy, loaded only once embeddings are on).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Protocol

from acp_memory.memory.index.files import Stamp

# A note waiting for its vector: (file id, path relative to the root, stamp when listed).
Pending = tuple[int, str, Stamp]
# A note's text as a vector is made from it: (path relative to the root, sha256 of its bytes).
Made = tuple[str, str]


class VectorShare(Protocol):
    """Vectors of the configured model kept beyond this index, for a root whose notes others
    index too (a shared project root: the server's embeddings table), so that a note is
    embedded once by whoever comes first. A share that cannot be reached takes nothing and
    keeps nothing: the notes are embedded here as any others."""

    def take(self, notes: Sequence[Made]) -> dict[str, list[float]]:
        """The vectors made from these very texts, by path."""
        ...

    def give(self, notes: Sequence[Made], vectors: Sequence[Sequence[float]]) -> None:
        """Keep the vectors made here for the others."""
        ...


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
    from acp_memory.memory.index.matrix import unit  # numpy: loaded once embeddings are on

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
