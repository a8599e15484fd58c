"""The direct scan: ranking notes straight from the files while their index is being built.

The seed's ranking: how many of the query's words a note's path plus body holds (a word
matches by its exact form or any of its stems, as a word prefix), ties by `scope:path`; as in
the index, a note holding a query identifier whole (`ZEPHYR_0C8A`, not just `ZEPHYR_…`) ranks
before every note that does not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from acp_memory.memory.index.files import read_note, walk_notes
from acp_memory.text.analyze import Query

# Files read between two looks at whether the indexes became ready (the scan then stops).
_LOOK_EVERY = 256

# (scope, root, path relative to the root, score: words matched, plus the number of words
# again for each identifier held whole, so that an identifier outranks any count of words)
Scanned = tuple[str, Path, str, int]


class _Word:
    """One query word: its forms, found by a substring test first (fast), then confirmed at
    the start of a word (and at its end too when `whole`: an identifier, not a prefix of a
    longer one)."""

    def __init__(self, forms: list[str], *, whole: bool = False) -> None:
        self.forms = forms
        end = r"(?!\w)" if whole else ""
        self.pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, forms)) + ")" + end)

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
    """The `limit` notes holding a query identifier whole first, then the most query words,
    and how many hold any word; None when `give_up()` turned true during the scan."""
    words = [_Word(group) for group in query.groups]
    identifiers = [_Word([ident], whole=True) for ident in query.identifiers]
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
                score += len(words) * sum(1 for i in identifiers if i.in_(folded))
                found.append((scope, root, rel, score))
    found.sort(key=lambda f: (-f[3], f"{f[0]}:{f[2]}"))
    return found[:limit], len(found)
