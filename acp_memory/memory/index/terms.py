"""A note as the index stores it: its path terms and analysed text, and the packed copy of them
that deleting it from the contentless FTS5 table feeds back.

A packed copy is compressed with a dictionary of the index's commonest words (`train`, made
once per index from its first large build): a note is a few KB, too little for zlib to find
much to repeat on its own. On bench/search.py's notes (random words, which compress worst) the
copies take 41% of the notes' bytes, 46% without the dictionary.

The analysis runs in the building thread. Worker processes, one per core, were measured: on
two cores they cut a 10,000-note build by a seventh (3.5 s against 4.1 s), and Python 3.11's
process pool can hang when a worker dies while the others start; not worth a hung build.
"""

from __future__ import annotations

import functools
import itertools
import struct
import zlib
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from acp_memory.text.analyze import analyze, document_terms, tokens

# A note's columns: (path terms, exact, stems, the three packed for a later delete).
Terms = tuple[str, str, str, bytes]

_HEAD = struct.Struct("<II")
# A 16 KB dictionary at level 3 packs 12% smaller than level 9 without one, in 15% less time
# (bench/search.py's notes); a 32 KB one (zlib's window) packs 2% smaller but takes a third
# longer, mostly in setting the dictionary for each note.
_DICTIONARY_BYTES = 16 << 10
_LEVEL = 3


def read_note(root: Path, rel: str) -> str | None:
    """A note's text (bad UTF-8 replaced), None when it cannot be read."""
    try:
        return (root / rel).read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None


def path_terms(rel: str) -> str:
    """The path column: exact forms and stems of the words in a note's relative path."""
    stem_of_path = rel.rsplit(".", 1)[0]
    out: list[str] = []
    for token in tokens(stem_of_path):
        a = analyze(token)
        out.extend((a.whole, *a.stems))
    return " ".join(out)


def pack(path: str, exact: str, stems: str, zdict: bytes) -> bytes:
    """The column values as stored beside the note, compressed, for `unpack`."""
    parts = [s.encode("utf-8", "surrogatepass") for s in (path, exact, stems)]
    packer = _packer(zdict).copy()  # a copy of one primed with zdict: a quarter quicker
    head = _HEAD.pack(len(parts[0]), len(parts[1]))
    return packer.compress(head + b"".join(parts)) + packer.flush()


@functools.lru_cache(maxsize=2)
def _packer(zdict: bytes) -> zlib._Compress:
    return zlib.compressobj(_LEVEL, zdict=zdict) if zdict else zlib.compressobj(_LEVEL)


def unpack(packed: bytes, zdict: bytes) -> tuple[str, str, str]:
    """The column values `pack` was given, exactly; zdict is the index's dictionary (a copy
    packed before the index had one does not use it)."""
    raw = (zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()).decompress(packed)
    a, b = _HEAD.unpack_from(raw)
    start = _HEAD.size
    path, exact, stems = (raw[i:j].decode("utf-8", "surrogatepass") for i, j in
                          itertools.pairwise((start, start + a, start + a + b, len(raw))))
    return path, exact, stems


def train(root: Path, rels: Iterable[str]) -> bytes:
    """A dictionary for `pack`: the commonest words of these notes' columns, the commonest
    last (zlib reaches the end of a dictionary most cheaply)."""
    counts: Counter[str] = Counter()
    for rel in rels:
        text = read_note(root, rel)
        if text is not None:
            for column in (path_terms(rel), *document_terms(text)):
                counts.update(column.split())
    words: list[str] = []
    size = 0
    for word, _ in counts.most_common():
        size += len(word.encode("utf-8", "surrogatepass")) + 1
        if size > _DICTIONARY_BYTES:
            break
        words.append(word)
    return " ".join(reversed(words)).encode("utf-8", "surrogatepass")


def note_terms(root: Path, rel: str, zdict: bytes) -> Terms | None:
    """A note's columns and their packed copy, None when it cannot be read."""
    text = read_note(root, rel)
    if text is None:
        return None
    path = path_terms(rel)
    exact, stems = document_terms(text)
    return path, exact, stems, pack(path, exact, stems, zdict)
