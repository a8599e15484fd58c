"""The direct scan: ranking notes straight from the files while their index is being built.

The seed's ranking: how many of the query's words a note's path plus body holds (a word
matches by its exact form or any of its stems, as a word prefix), ties by `scope:path`; as in
the index, a note holding a query identifier whole (`ZEPHYR_0C8A`, not just `ZEPHYR_…`) ranks
before every note that does not.

Most files hold no query word at all, so each is first looked at as bytes, folded the way the
query's terms are (`_FOLD_BYTES`), and decoded and folded as text only when one of the terms'
bytes is in there. A build gives way to running scans between its batches (`SCANS`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from acp_memory.memory.index.files import note_paths
from acp_memory.text.analyze import Query

# Files read between two looks at whether the indexes became ready (the scan then stops).
_LOOK_EVERY = 256
_READ = 1 << 16  # a note is most often read whole by one read of this size

# (scope, root, path relative to the root, score: words matched, plus the number of words
# again for each identifier held whole, so that an identifier outranks any count of words)
Scanned = tuple[str, Path, str, int]


class Scans:
    """The direct scans running in this process. A build gives way to them between its
    batches: a search waits on its scan, and both want the same cores (and the GIL)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running: set[int] = set()
        self._ids = itertools.count()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Counts as a running scan for the duration of the block."""
        with self._changed:
            scan = next(self._ids)
            self._running.add(scan)
        try:
            yield
        finally:
            with self._changed:
                self._running.discard(scan)
                self._changed.notify_all()

    def give_way(self, timeout: float, outlasted: set[int]) -> None:
        """Wait until the scans running now have ended, at most `timeout` seconds; those still
        running then join `outlasted` and are never waited for again (a stuck scan cannot
        stall a build)."""
        with self._changed:
            waiting = self._running - outlasted
            if not self._changed.wait_for(lambda: not waiting & self._running, timeout):
                outlasted |= waiting & self._running


SCANS = Scans()  # the scans of every store of this process: they share its cores


def fold(text: str) -> str:
    """Text folded as the query's terms are: lower case, ё as е, a hyphen as an underscore."""
    return text.lower().replace("ё", "е").replace("-", "_")


def _fold_bytes_table() -> bytes:
    """A bytes.translate table under which a character's UTF-8 bytes and those of its `fold`
    read the same, for the characters of `_BYTE_FOLDED`: ASCII letters lowered, '-' as '_',
    Cyrillic capitals as small letters and ё as е. Where a capital and its small letter differ
    in a byte, the two byte values are merged (their smallest stands for all), so other
    characters sharing those bytes read alike too: that only lets a file through that the
    text test then rejects."""
    merged = list(range(256))

    def top(b: int) -> int:
        while merged[b] != b:
            b = merged[b]
        return b

    pairs = [(c, c.lower()) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
    pairs += [(c, c.lower()) for c in "АБВГДЕЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯ"]
    pairs += [("-", "_"), ("ё", "е"), ("Ё", "е")]
    for char, folded in pairs:
        for a, b in zip(char.encode(), folded.encode(), strict=True):
            low, high = sorted((top(a), top(b)))
            merged[high] = low
    return bytes(top(b) for b in range(256))


_FOLD_BYTES = _fold_bytes_table()
# The characters a term may hold for the byte test to stand for the text test: every
# character whose `fold` is one of these is in the table, but for `_UNLIKE`'s.
_BYTE_FOLDED = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_абвгдежзийклмнопрстуфхцчшщъыьэюя")
# Characters folding into `_BYTE_FOLDED` from bytes of another length (KELVIN SIGN to k, İ to
# i and a dot), by the letter they fold to: a file holding one is tested as text.
_UNLIKE = {"k": "\u212a".encode(), "i": "\u0130".encode()}


class _Word:
    """One query word: its forms, found at the start of a word (and at its end too when
    `whole`: an identifier, not a prefix of a longer one). `needles` are the forms' bytes as
    `_FOLD_BYTES` folds them, None when a form holds a character it does not fold."""

    def __init__(self, forms: list[str], *, whole: bool = False) -> None:
        self.forms = forms
        self.whole = whole
        self.needles: list[bytes] | None = None
        if all(_BYTE_FOLDED.issuperset(form) for form in forms):
            # A stem may begin a longer word, so a form is looked for as a substring, and one
            # holding another form needs no look of its own.
            folded = sorted({form.encode().translate(_FOLD_BYTES) for form in forms}, key=len)
            self.needles = []
            for needle in folded:
                if not any(shorter in needle for shorter in self.needles):
                    self.needles.append(needle)

    def in_(self, folded: str) -> bool:
        """Whether `folded` (text as `fold` folds it) holds the word."""
        for form in self.forms:
            at = folded.find(form)
            while at >= 0:
                end = at + len(form)
                if (at == 0 or not _word_char(folded[at - 1])) and not (
                    self.whole and end < len(folded) and _word_char(folded[end])
                ):
                    return True
                at = folded.find(form, at + 1)
        return False

    def may_be_in(self, folded_rel: str, folded_bytes: bytes) -> bool:
        """Whether a note whose path and bytes (`_FOLD_BYTES`) these are may hold the word."""
        return (
            self.needles is None
            or any(form in folded_rel for form in self.forms)
            or any(needle in folded_bytes for needle in self.needles)
        )


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"  # what a regular expression's \w matches


def _read(path: str) -> bytes | None:
    # One open and (for a note under _READ bytes) one read: the scan reads every file.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, _READ)
        if len(data) < _READ:
            return data
        chunks = [data]
        while more := os.read(fd, _READ):
            chunks.append(more)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


class _Look:
    """Which of the query's words a note may hold, from its path and bytes alone (the others it
    cannot): its bytes are neither decoded nor folded when that is none, as for most notes."""

    def __init__(self, words: list[_Word]) -> None:
        self.words = words
        forms = [form for word in words for form in word.forms]
        self.unlike = [b for letter, b in _UNLIKE.items() if any(letter in f for f in forms)]
        # A note none of whose bytes hold a needle (nor its path a form) holds no word; with
        # a word the bytes cannot stand for, every note is looked at as text.
        self.needles = [n for w in words for n in w.needles or ()]
        self.filtered = all(w.needles is not None for w in words)
        # ASCII folds to ASCII: a note all ASCII holds no needle with a byte past it.
        self.ascii_needles = [n for n in self.needles if n.isascii()]

    def of(self, rel: str, data: bytes) -> list[_Word]:
        """The words the note at `rel` holding `data` may hold."""
        ascii_only = data.isascii()
        if not ascii_only and any(unlike in data for unlike in self.unlike):
            return self.words  # a character folding to another length: the text decides
        folded_rel = fold(rel)
        if self.filtered and not any(f in folded_rel for w in self.words for f in w.forms):
            needles = self.ascii_needles if ascii_only else self.needles
            if not needles:
                return []
            folded_bytes = data.translate(_FOLD_BYTES)
            if not any(needle in folded_bytes for needle in needles):
                return []
        else:
            folded_bytes = data.translate(_FOLD_BYTES)
        return [w for w in self.words if w.may_be_in(folded_rel, folded_bytes)]


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
    look = _Look(words)
    found: list[Scanned] = []
    seen = 0
    with SCANS.running():
        for scope, root in roots:
            for rel, path in note_paths(root):
                seen += 1
                if seen % _LOOK_EVERY == 0 and give_up():
                    return None
                data = _read(path)
                if data is None:
                    continue
                maybe = look.of(rel, data)
                if not maybe:
                    continue  # neither decoded nor folded, as most notes
                folded = fold(f"{rel}\n{data.decode('utf-8', errors='replace')}")
                score = sum(1 for word in maybe if word.in_(folded))
                if score:
                    score += len(words) * sum(1 for i in identifiers if i.in_(folded))
                    found.append((scope, root, rel, score))
    found.sort(key=lambda f: (-f[3], f"{f[0]}:{f[2]}"))
    return found[:limit], len(found)
