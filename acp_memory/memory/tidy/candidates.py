"""What a tidy run is handed: groups of a root's notes that may say one thing twice
(duplicates), give one subject two values (contradictions), or cite paths that are gone
(stale).

Duplicates are notes whose 3-word shingles overlap at least 0.8 (`text/shingles.py`), found by
MinHash and LSH (`minhash.py`) and each pair verified by its exact overlap; a group is a
connected set of such pairs. Contradictions are notes stating one subject with different values
(`text/subjects.py`). Stale notes cite paths gone from the workspace (`cites.py`, as `notes
stale` lists them). Each group's paths are newest first: by the journal's last change when it
left the note as it is, else the file's time (`history/provenance.py`).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from acp_memory.memory.cites import missing_paths
from acp_memory.memory.facts import cite_line
from acp_memory.memory.history.provenance import provenances
from acp_memory.memory.index.files import walk_notes
from acp_memory.memory.roots import SCOPES, scope_name
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.text.shingles import is_duplicate, overlap, shingles, words
from acp_memory.text.subjects import Statement, statements

Kind = Literal["duplicate", "contradiction", "stale"]
KINDS: tuple[Kind, ...] = ("duplicate", "contradiction", "stale")  # the order groups come in
MAX_GROUPS = 50  # memory.tidy.max_groups' default
CLOSE_COSINE = 0.92  # with embeddings on, notes this close in meaning are duplicates too
_E = TypeVar("_E")


@dataclass(frozen=True)
class Group:
    """What one tidy child is handed."""

    kind: Kind
    paths: tuple[str, ...]  # `scope:rel`, newest first
    why: str  # one line: "3-word shingles overlap 0.86"


@dataclass
class _Note:
    rel: str
    data: bytes
    mtime: float
    text: str


def candidate_groups(store: MemoryStore, scope: str, max_groups: int = MAX_GROUPS) -> list[Group]:
    """At most max_groups groups of the notes of one root (`global` or `project`):
    duplicates, then contradictions, then stale notes."""
    name = scope_name(scope.rstrip(":"))
    if name not in SCOPES:
        raise NoteError(f"unknown scope {scope!r}; use global or project")
    root = store.locate(f"{name}:").root  # a refused project root says why
    store.refresh((name,))
    notes = _read(root)
    found: list[tuple[Kind, list[int], str]] = [
        *(("duplicate", g, why) for g, why in _duplicates(notes, _close_meanings(
            store, root, notes))),
        *(("contradiction", g, why) for g, why in _contradictions(notes)),
        *(("stale", [i], why) for i, why in _stale(notes, store.roots.cwd)),
    ]
    found = found[:max(max_groups, 0)]
    order = _newest_first(store, root, notes, {i for _, group, _ in found for i in group})
    return [Group(kind, tuple(f"{name}:{notes[i].rel}"
                              for i in sorted(group, key=order.__getitem__)), why)
            for kind, group, why in found]


def _read(root: Path) -> list[_Note]:
    notes: list[_Note] = []
    for rel, stamp in sorted(walk_notes(root)):
        try:
            data = (root / rel).read_bytes()
        except OSError:
            continue  # gone since the walk
        notes.append(_Note(rel, data, stamp[0] / 1e9, data.decode("utf-8", errors="replace")))
    return notes


def _close_meanings(store: MemoryStore, root: Path,
                    notes: list[_Note]) -> list[tuple[int, int, float]]:
    """With embeddings on, the pairs of notes whose vectors have a cosine ≥ 0.92 (as the index
    holds them: a note changed since has none until it is embedded again)."""
    at = {note.rel: i for i, note in enumerate(notes)}
    return [(at[a], at[b], score)
            for a, b, score in store.indexes.close_pairs(root, CLOSE_COSINE)
            if a in at and b in at]


def _duplicates(notes: list[_Note],
                close: list[tuple[int, int, float]]) -> list[tuple[list[int], str]]:
    # numpy, a tenth of a second to import, loads with the first tidy, not with every
    # surface that imports this package.
    from acp_memory.memory.tidy.minhash import (
        WordHashes,
        candidate_pairs,
        shingle_hashes,
        signatures,
    )

    folded = [words(n.text) for n in notes]
    hashes = WordHashes()
    sigs = signatures([shingle_hashes(f, hashes) for f in folded])
    sets: dict[int, set[tuple[str, ...]]] = {}

    def shingles_of(i: int) -> set[tuple[str, ...]]:
        if i not in sets:
            sets[i] = shingles(folded[i])
        return sets[i]

    # Each edge keeps how it was found: ("overlap", share) or, a pair only the vectors
    # found, ("cosine", score).
    edges: dict[tuple[int, int], tuple[str, float]] = {}
    for a, b in sorted(candidate_pairs(sigs)):
        share = overlap(shingles_of(a), shingles_of(b))
        if is_duplicate(share):
            edges[a, b] = ("overlap", share)
    for a, b, score in close:
        edges.setdefault((min(a, b), max(a, b)), ("cosine", score))
    groups: list[tuple[list[int], str]] = []
    for members, found in _components((a, b, e) for (a, b), e in sorted(edges.items())):
        lowest = {how: min(v for h, v in found if h == how) for how, _ in found}
        why: list[str] = []
        if "overlap" in lowest:
            why.append(f"3-word shingles overlap {_floor2(lowest['overlap'])}")
        if "cosine" in lowest:
            why.append(f"cosine {_floor2(lowest['cosine'])}")
        groups.append((members, "; ".join(why)))
    return groups


def _floor2(share: float) -> str:
    # Cut, not rounded: 0.799 is never shown as the 0.80 it falls short of.
    return f"{int(share * 100 + 1e-9) / 100:.2f}"


def _components(edges: Iterable[tuple[int, int, _E]]) -> list[tuple[list[int], list[_E]]]:
    """The connected components of the edges, each with the labels of its edges."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    kept = list(edges)
    for a, b, _ in kept:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    members: dict[int, list[int]] = defaultdict(list)
    for x in parent:
        members[find(x)].append(x)
    labels: dict[int, list[_E]] = defaultdict(list)
    for a, _, label in kept:
        labels[find(a)].append(label)
    return [(sorted(members[r]), labels[r]) for r in sorted(members)]


def _contradictions(notes: list[_Note]) -> list[tuple[list[int], str]]:
    stated: dict[str, dict[int, list[Statement]]] = defaultdict(dict)
    for i, note in enumerate(notes):
        if " is " not in note.text and "use" not in note.text.lower():
            continue  # no statement shape can match: most notes of a large root
        for statement in statements(note.text):
            stated[statement.subject].setdefault(i, []).append(statement)
    groups: list[tuple[list[int], str]] = []
    for by_note in stated.values():
        values = {s.value for said in by_note.values() for s in said}
        if len(by_note) < 2 or len(values) < 2:
            continue
        members = sorted(by_note)
        question = by_note[members[0]][0].question
        who = "both" if len(members) == 2 else f"all {len(members)}"
        groups.append((members, f"{who} say {question}"))
    return sorted(groups)


def _stale(notes: list[_Note], cwd: Path | None) -> list[tuple[int, str]]:
    if cwd is None:
        return []  # paths are checked against the session's cwd, never anywhere else
    real_cwd = os.path.realpath(cwd)
    found: list[tuple[int, str]] = []
    for i, note in enumerate(notes):
        missing = missing_paths(note.text, cwd, real_cwd)
        if missing:
            found.append((i, "; ".join(cite_line(p) for p in missing)))
    return found


def _newest_first(store: MemoryStore, root: Path, notes: list[_Note],
                  wanted: set[int]) -> dict[int, tuple[float, str]]:
    """A sort key per note of wanted that puts the newest first (the path breaks ties)."""
    picked = sorted(wanted)
    origins = provenances(store.journal,
                          [(root, notes[i].rel, notes[i].data, notes[i].mtime) for i in picked])
    return {i: (-origin.changed.timestamp(), notes[i].rel)
            for i, origin in zip(picked, origins, strict=True)}
