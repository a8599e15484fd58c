"""The vectors in memory follow the index: a re-embedded note's new vector, a dropped note gone,
a note added by another connection; rows read again only when they changed."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_memory.memory.index import matrix as vector_matrix
from acp_memory.memory.index import vectors
from acp_memory.memory.index.schema import open_db

KEY = "fake/model"


def note(db: sqlite3.Connection, rowid: int) -> vectors.Pending:
    db.execute("INSERT INTO files(id, path, mtime_ns, size, ino, terms) VALUES (?, ?, 1, 1, 1, '')",
               (rowid, f"n{rowid}.md"))
    return (rowid, f"n{rowid}.md", (1, 1, 1))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = open_db(tmp_path / "index.sqlite3")
    yield connection
    connection.close()  # not left to the collector, inside a later test counting descriptors


def test_a_re_embedded_or_dropped_note_is_seen_by_the_next_nearest(db: sqlite3.Connection) -> None:
    a, b, c = note(db, 1), note(db, 2), note(db, 3)
    vectors.store(db, KEY, [a, b, c], [[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    matrix = vector_matrix.VectorMatrix()
    assert matrix.nearest(db, KEY, [1, 0.1, 0], 1) == [(1, pytest.approx(0.995, abs=1e-3))]
    vectors.store(db, KEY, [b], [[1, 0.1, 0]])  # note 2 changed and was embedded again
    assert [rowid for rowid, _ in matrix.nearest(db, KEY, [1, 0.1, 0], 3)] == [2, 1, 3]
    db.execute("DELETE FROM vectors WHERE file_id = 1")  # note 1 re-indexed, no vector yet
    assert [rowid for rowid, _ in matrix.nearest(db, KEY, [1, 0.1, 0], 3)] == [2, 3]


def test_a_vector_another_connection_wrote_is_read_without_reloading_the_rest(
    db: sqlite3.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vectors.store(db, KEY, [note(db, 1)], [[1, 0]])
    matrix = vector_matrix.VectorMatrix()
    assert [r for r, _ in matrix.nearest(db, KEY, [0, 1], 5)] == [1]
    other = open_db(tmp_path / "index.sqlite3")
    vectors.store(other, KEY, [note(other, 2)], [[0, 1]])
    other.close()
    loads: list[int] = []
    full_load = vector_matrix.VectorMatrix._load
    monkeypatch.setattr(vector_matrix.VectorMatrix, "_load",
                        lambda self, *a: loads.append(1) or full_load(self, *a))
    assert [r for r, _ in matrix.nearest(db, KEY, [0, 1], 5)] == [2, 1]
    assert loads == []  # only the new row was read
