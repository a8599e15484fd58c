"""Ranked search over the notes of one or both roots, with a snippet around the best matches."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from acp_memory.memory.index.indexes import SearchIndexes
from acp_memory.memory.index.query import TIERS, Candidate, Ranked
from acp_memory.memory.roots import Roots
from acp_memory.text.analyze import parse_query

SNIPPET_CHARS = 1200


@dataclass(frozen=True)
class Hit:
    """One search result: `scope:rel` path, relevance score and a snippet of the note."""

    path: str
    score: float
    snippet: str

    def as_json(self) -> dict[str, object]:
        return {"path": self.path, "score": self.score, "snippet": self.snippet}


Hits = Ranked[Hit]


def search_notes(
    roots: Roots, indexes: SearchIndexes, query: str, scopes: tuple[str, ...], limit: int
) -> Hits:
    """At most `limit` notes of the given scopes, best first, with how many matched in all;
    exact identifier matches lead."""
    parsed = parse_query(query)
    terms = parsed.terms
    if not terms:
        return Ranked()
    found: list[tuple[str, Path, Candidate]] = []
    total = 0
    for scope in scopes:
        root = roots.root_of(scope)
        candidates = indexes.candidates(root, parsed, limit)
        total += candidates.total
        found.extend((scope, root, c) for c in candidates)
    found.sort(key=lambda x: (x[2].tier, -x[2].score, x[0], x[2].rel))
    # Higher tiers rank first; lifting their scores keeps the shown order monotonic.
    lift = max((c.score for _, _, c in found), default=0.0)
    pattern = _highlight_pattern(terms)
    hits: list[Hit] = []
    for scope, root, cand in found:
        if len(hits) >= limit:
            break
        try:
            text = (root / cand.rel).read_bytes().decode("utf-8", errors="replace")
        except OSError:
            total -= 1  # deleted since the index saw it
            continue
        score = cand.score + (TIERS - 1 - cand.tier) * lift
        hits.append(Hit(f"{scope}:{cand.rel}", round(score, 3), snippet(text, pattern)))
    return Ranked(hits, total)


def marked(text: str, query: str) -> list[tuple[str, bool]]:
    """`text` cut into runs, each flagged when it matches one of the query's terms, as the
    search ranks them (a stem matches the words it begins)."""
    terms = parse_query(query).terms
    if not terms:
        return [(text, False)] if text else []
    runs: list[tuple[str, bool]] = []
    pos = 0
    for match in _highlight_pattern(terms).finditer(text):
        if match.start() > pos:
            runs.append((text[pos : match.start()], False))
        runs.append((match.group(), True))
        pos = match.end()
    if pos < len(text):
        runs.append((text[pos:], False))
    return runs


def _highlight_pattern(terms: list[str]) -> re.Pattern[str]:
    # Stems are word prefixes ("кошк" finds "кошками"); '_' in a term also matches '-'.
    alternatives = sorted({re.escape(t).replace("_", "[_-]") for t in terms}, key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")", re.IGNORECASE)


def snippet(text: str, pattern: re.Pattern[str], limit: int = SNIPPET_CHARS) -> str:
    """The stretch of text (at most `limit` characters) holding the most matches."""
    text = text.strip()
    if len(text) <= limit:
        return text
    width = limit - 2  # room for the two ellipses
    positions = [m.start() for m in pattern.finditer(text)]
    best_start, best_count = 0, 0
    right = 0
    for left, pos in enumerate(positions):
        while right < len(positions) and positions[right] < pos + width:
            right += 1
        if right - left > best_count:
            best_start, best_count = pos, right - left
    start = max(0, best_start - 80)
    line_start = text.rfind("\n", 0, best_start)
    if line_start >= start:
        start = line_start + 1  # begin at the line holding the first match, when it is near
    start = min(start, len(text) - width)
    body = text[start : start + width]
    return ("…" if start > 0 else "") + body + ("…" if start + width < len(text) else "")
