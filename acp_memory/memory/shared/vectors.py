"""A shared root's note vectors through the server's `embeddings` table: computed once, by
whichever process embeds a note first, and taken by the others for the same text.

A row names the note's path, the sha256 of the text it was made from and the model's
`memory.embeddings` settings (model and dimensions, 0 for the model's own size: the same two
that name the vectors in a local index), so a vector is only ever taken for that very text of
that very model. A server that cannot be reached shares nothing: the keeper embeds locally.
"""

from __future__ import annotations

import logging
import math
import struct
from collections.abc import Sequence
from pathlib import Path

import psycopg

from acp_memory.llm.embeddings import Embeddings
from acp_memory.memory.index.indexes import SearchIndexes
from acp_memory.memory.index.vectors import Made
from acp_memory.memory.shared.database import Database, SharedUnavailable
from acp_memory.memory.shared.schema import SCHEMA

log = logging.getLogger(__name__)

# The server being down or refusing is the keeper's business no more than it is the search's.
_UNREACHED = (SharedUnavailable, psycopg.Error)  # a schema too new included


class TableVectors:
    """The `VectorShare` of one project key on one database, for one embeddings model."""

    def __init__(self, database: Database, key: str, embeddings: Embeddings) -> None:
        self.database = database
        self.key = key
        self.model = embeddings.settings.model
        self.dimensions = embeddings.settings.dimensions or 0

    def take(self, notes: Sequence[Made]) -> dict[str, list[float]]:
        """The vectors the table holds for these very texts (path and sha256), by path."""
        if not notes:
            return {}
        wanted = dict(notes)
        try:
            with self.database.connection() as conn:
                rows = conn.execute(
                    f"SELECT path, sha256, vector FROM {SCHEMA}.embeddings WHERE project = %s "
                    "AND model = %s AND dimensions = %s AND path = ANY(%s)",
                    (self.key, self.model, self.dimensions, list(wanted))).fetchall()
        except _UNREACHED as exc:
            log.debug("shared vectors of %s not taken: %s", self.key, exc)
            return {}
        found: dict[str, list[float]] = {}
        for path, sha256, blob in rows:
            if wanted.get(path) == sha256 and (vector := self._unpacked(bytes(blob))):
                found[path] = vector
        return found

    def give(self, notes: Sequence[Made], vectors: Sequence[Sequence[float]]) -> None:
        """Keep the vectors made here in the table (the newer text's replaces an older one)."""
        rows = [(self.key, path, sha256, self.model, self.dimensions, _packed(vector))
                for (path, sha256), vector in zip(notes, vectors, strict=True) if vector]
        if not rows:
            return
        try:
            with self.database.connection() as conn:
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {SCHEMA}.embeddings AS e (project, path, sha256, model, "
                        "dimensions, vector) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT "
                        "(project, path, model, dimensions) DO UPDATE SET sha256 = "
                        "excluded.sha256, vector = excluded.vector", rows)
                conn.commit()
        except _UNREACHED as exc:
            log.debug("shared vectors of %s not given: %s", self.key, exc)

    def _unpacked(self, blob: bytes) -> list[float] | None:
        """A row's vector, None when it cannot be one of this model's (a tampered row)."""
        count, rest = divmod(len(blob), 4)
        if not count or rest or (self.dimensions and count != self.dimensions):
            return None
        vector = list(struct.unpack(f"<{count}f", blob))
        return vector if all(math.isfinite(x) for x in vector) else None


def _packed(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)  # float32, little-endian, as the schema says


def share_vectors(indexes: SearchIndexes, root: Path, database: Database, key: str) -> None:
    """Let the keeper of `indexes` share root's vectors (a shared project root's local copy)
    through the table, when embeddings are on."""
    if indexes.embeddings is not None:
        indexes.shared_vectors[root.absolute()] = TableVectors(database, key,
                                                               indexes.embeddings)
