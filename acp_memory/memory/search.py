"""Ranked search over the notes of one or both roots, with a snippet around the best matches."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from acp_memory.llm.embeddings import EmbeddingsUnavailable
from acp_memory.memory.index.indexes import SearchIndexes
from acp_memory.memory.index.query import TIERS, Ranked
from acp_memory.memory.redact import redact_text
from acp_memory.memory.roots import Roots
from acp_memory.memory.scan import scan_notes
from acp_memory.text.analyze import Query, parse_query

SNIPPET_CHARS = 1200
DEPTH = 50  # each list a fused search joins is taken this deep
RRF_K = 60  # reciprocal rank fusion's constant: 1 / (RRF_K + rank)


@dataclass(frozen=True)
class Hit:
    """One search result: `scope:rel` path, relevance score and a snippet of the note."""

    path: str
    score: float
    snippet: str

    def as_json(self) -> dict[str, object]:
        return {"path": self.path, "score": self.score, "snippet": self.snippet}


class Hits(Ranked[Hit]):
    """Search results, best first; `partial` when the files were scanned because an index was
    still being built, `unavailable` the reason the embeddings failed (words only then),
    `offline` a shared project root's marker when its server was out of reach (the hits are
    the local copy's: `shared memory offline: synced <time>`)."""

    def __init__(
        self, items: Iterable[Hit] = (), total: int = 0, *, partial: bool = False,
        unavailable: str = "", offline: str = "",
    ) -> None:
        super().__init__(items, total)
        self.partial = partial
        self.unavailable = unavailable
        self.offline = offline


# A found note: (scope, root, path relative to the root, score).
_Found = tuple[str, Path, str, float]


def search_notes(
    roots: Roots, indexes: SearchIndexes, query: str, scopes: tuple[str, ...], limit: int
) -> Hits:
    """At most `limit` notes of the given scopes, best first, with how many matched in all.

    With embeddings on, reciprocal rank fusion of the word ranking, the broad any-word one
    and the vector one (a note in neither word list only at memory.embeddings.min_similarity
    or nearer); the two word lists alone when the provider fails; without embeddings the word
    ranking alone, exact identifier matches first.
    """
    parsed = parse_query(query)
    if not parsed.terms:
        return Hits()
    where = [(scope, roots.root_of(scope)) for scope in scopes]
    embeddings = indexes.embeddings
    fusing = embeddings is not None
    lists = [(scope, root, indexes.lists(root, parsed, DEPTH if fusing else limit))
             for scope, root in where]
    pattern = _highlight_pattern(parsed.terms)
    if any(found is None for _, _, found in lists):
        scanned = _scanned(indexes, where, parsed, pattern, limit)
        if scanned is not None:  # empty is an answer too
            return scanned
        # None: the indexes became ready during the scan, so they answer after all.
        return search_notes(roots, indexes, query, scopes, limit)
    words = sorted(((scope, root, c) for scope, root, found in lists if found
                    for c in found.words), key=lambda x: (x[2].tier, -x[2].score, x[0], x[2].rel))
    total = sum(found.words.total for _, _, found in lists if found)
    if not fusing:
        # Higher tiers rank first; lifting their scores keeps the shown order monotonic.
        lift = max((c.score for _, _, c in words), default=0.0)
        # Three decimals, as before fusion (whose 1 / (60 + rank) scores need four).
        ranked = [(scope, root, c.rel, round(c.score + (TIERS - 1 - c.tier) * lift, 3))
                  for scope, root, c in words]
        return _hits(ranked, pattern, limit, total)
    assert embeddings is not None
    broad = _best_first((scope, root, c.rel, c.score) for scope, root, found in lists if found
                        for c in found.broad)
    ranked_lists = [[(s, r, c.rel, c.score) for s, r, c in words][:DEPTH], broad]
    unavailable = ""
    try:
        vector = embeddings.embed_query(redact_text(query))  # never a secret out
    except EmbeddingsUnavailable as exc:
        unavailable = str(exc)
    else:
        # A vector is always nearest to something: a note no word list holds counts only
        # when it is near enough, so that a query about nothing in the notes finds nothing.
        floor = embeddings.settings.min_similarity
        by_words = {(scope, rel) for ranked in ranked_lists for scope, _, rel, _ in ranked}
        ranked_lists.append(_best_first(
            (scope, root, rel, score) for scope, root in where
            for rel, score in indexes.nearest(root, vector, DEPTH)
            if score >= floor or (scope, rel) in by_words))
    fused = fuse(ranked_lists)
    hits = _hits(fused, pattern, limit, max(total, len(fused)))
    hits.unavailable = unavailable
    return hits


def _best_first(found: Iterable[_Found]) -> list[_Found]:
    """The notes of both roots by score, ties by `scope:path`, to DEPTH."""
    return sorted(found, key=lambda x: (-x[3], x[0], x[2]))[:DEPTH]


def fuse(ranked_lists: list[list[_Found]]) -> list[_Found]:
    """Reciprocal rank fusion: each note scores the sum of 1 / (RRF_K + its rank) over the
    lists that hold it (ranks from 1); ties by `scope:path`."""
    scores: dict[tuple[str, str], float] = {}
    where: dict[tuple[str, str], Path] = {}
    for ranked in ranked_lists:
        for place, (scope, root, rel, _) in enumerate(ranked, start=1):
            key = (scope, rel)
            scores[key] = scores.get(key, 0.0) + 1 / (RRF_K + place)
            where[key] = root
    order = sorted(scores, key=lambda k: (-scores[k], f"{k[0]}:{k[1]}"))
    return [(scope, where[(scope, rel)], rel, scores[(scope, rel)]) for scope, rel in order]


def _scanned(
    indexes: SearchIndexes, where: list[tuple[str, Path]], parsed: Query,
    pattern: re.Pattern[str], limit: int,
) -> Hits | None:
    """The direct scan's answer; None when the indexes became ready meanwhile."""
    scanned = scan_notes(where, parsed, limit,
                         give_up=lambda: all(indexes.ready(root) for _, root in where))
    if scanned is None:
        return None
    found, total = scanned
    hits = _hits([(s, r, rel, float(n)) for s, r, rel, n in found], pattern, limit, total)
    hits.partial = True
    return hits


def _hits(found: list[_Found], pattern: re.Pattern[str], limit: int, total: int) -> Hits:
    hits: list[Hit] = []
    for scope, root, rel, score in found:
        if len(hits) >= limit:
            break
        try:
            text = (root / rel).read_bytes().decode("utf-8", errors="replace")
        except OSError:
            total -= 1  # deleted since the index saw it
            continue
        hits.append(Hit(f"{scope}:{rel}", round(score, 4), snippet(text, pattern)))
    return Hits(hits, total)


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
