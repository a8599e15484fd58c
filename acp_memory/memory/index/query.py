"""Ranking the notes of one index for a query: BM25 within tiers, best tier first."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from acp_memory.text.analyze import Query

T = TypeVar("T")
TIERS = 3  # an exact identifier, every query word, any query word
# BM25 column weights: a word in the path (the title) says more than one in the body;
# an exact word form more than a shared stem.
_WEIGHTS = "bm25(fts, 4.0, 2.0, 1.0)"


class Ranked(list[T]):
    """Results best first, and `total`: how many matched before a limit cut the list."""

    def __init__(self, items: Iterable[T] = (), total: int = 0) -> None:
        super().__init__(items)
        self.total = max(total, len(self))


@dataclass(frozen=True)
class Candidate:
    """A matching note: path relative to the root, BM25 score, and tier (0 ranks first)."""

    rel: str
    score: float
    tier: int


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _any_word(query: Query) -> str:
    return "(" + " OR ".join(map(_quote, query.terms)) + ")"


_SQL = (
    f"SELECT f.path, -{_WEIGHTS} FROM fts JOIN files f ON f.id = fts.rowid "
    f"WHERE fts MATCH ? ORDER BY {_WEIGHTS} LIMIT ?"
)


def broad(db: sqlite3.Connection, query: Query, depth: int) -> list[Candidate]:
    """The `depth` best notes holding any query word, by BM25 alone: wider than `rank`,
    which keeps only the notes holding every word whenever some do."""
    return [Candidate(path, score, TIERS - 1) for path, score in
            db.execute(_SQL, (_any_word(query), depth))]


def rank(db: sqlite3.Connection, query: Query, limit: int) -> Ranked[Candidate]:
    """The best notes of the first tier that has any (exact identifier, every word, any
    word), and how many notes that tier matched in all."""
    any_word = _any_word(query)
    # Each tier is one MATCH expression over the same phrases, so BM25 scores stay
    # comparable; AND lets FTS5 intersect posting lists instead of scoring every match.
    tiers = [any_word]
    if len(query.groups) > 1:
        tiers.insert(0, " AND ".join(
            "(" + " OR ".join(map(_quote, group)) + ")" for group in query.groups
        ))
    if query.identifiers:
        exact = "{path exact} : (" + " OR ".join(map(_quote, query.identifiers)) + ")"
        tiers.insert(0, f"{any_word} AND {exact}")
    count = "SELECT count(*) FROM fts JOIN files f ON f.id = fts.rowid WHERE fts MATCH ?"
    # Tier numbers: 0 exact identifier, 1 every word, 2 any word (absent tiers skipped).
    numbers = [t for t, present in enumerate([bool(query.identifiers),
                                               len(query.groups) > 1, True]) if present]
    found: dict[str, Candidate] = {}
    total = 0
    for tier, expression in zip(numbers, tiers, strict=True):
        for path, score in db.execute(_SQL, (expression, limit)):
            found.setdefault(path, Candidate(path, score, tier))
        if found:
            # Like a web search engine: notes holding every word (or the identifier)
            # answer the query; any-word matches are the fallback when none do.
            # Scoring every partial match is also the slow part (bench/search.py).
            total = len(found)
            if total >= limit:  # cut by the limit: count the rest, without scoring
                (total,) = db.execute(count, (expression,)).fetchone()
            break
    best = sorted(found.values(), key=lambda c: (c.tier, -c.score, c.rel))[:limit]
    return Ranked(best, total)
