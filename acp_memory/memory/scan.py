"""The direct scan: ranking notes straight from the files while their index is being built.

The seed's ranking: how many of the query's words a note's path plus body holds (a word
matches by its exact form or any of its stems, as a word prefix), ties by `scope:path`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from acp_memory.memory.index.files import read_note, walk_notes
from acp_memory.text.analyze import Query

# Files read between two looks at whether the indexes became ready (the scan then stops).
_LOOK_EVERY = 256

# (scope, root, path relative to the root, words matched)
Scanned = tuple[str, Path, str, int]


class _Word:
    """One query word: its forms, found by a substring test first (fast), then confirmed at
    the start of a word."""

    def __init__(self, forms: list[str]) -> None:
        self.forms = forms
        self.pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, forms)) + ")")

    def in_(self, folded: str) -> bool:
        return any(form in folded for form in self.forms) and bool(self.pattern.search(folded))


def fold(text: str) -> str:
    """Text folded as the query's terms are: lower case, ё as е, a hyphen as an underscore."""
    return text.lower().replace("ё", "е").replace("-", "_")


def scan_notes(
    roots: Sequence[tuple[str, Path]],
    query: Query,
    limit: int,
    give_up: Callable[[], bool],
) -> tuple[list[Scanned], int] | None:
    """The `limit` notes holding the most query words, and how many hold any; None when
    `give_up()` turned true during the scan."""
    words = [_Word(group) for group in query.groups]
    found: list[Scanned] = []
    seen = 0
    for scope, root in roots:
        for rel, _ in walk_notes(root):
            seen += 1
            if seen % _LOOK_EVERY == 0 and give_up():
                return None
            text = read_note(root, rel)
            if text is None:
                continue
            folded = fold(f"{rel}\n{text}")
            score = sum(1 for word in words if word.in_(folded))
            if score:
                found.append((scope, root, rel, score))
    found.sort(key=lambda f: (-f[3], f"{f[0]}:{f[2]}"))
    return found[:limit], len(found)
