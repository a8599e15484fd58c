"""A note as the index stores it: its path terms and analysed text, and the packed copy of them
that deleting it from the contentless FTS5 table feeds back.

A packed copy is compressed with a dictionary of the index's commonest words (`train`, made
once per index from its first large build): a note is a few KB, too little for zlib to find
much to repeat on its own. On bench/search.py's notes (random words, which compress worst) the
copies take 41% of the notes' bytes, 46% without the dictionary.

The analysis is pure, so a large build spreads it over worker processes, one per core, while
the building thread writes to SQLite; a small one is analysed inline, since a worker takes a
few tenths of a second to start. This module imports nothing heavy for that reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import logging
import multiprocessing
import os
import signal
import struct
import sys
import zlib
from collections import Counter, deque
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from acp_memory.text.analyze import analyze, document_terms, tokens

log = logging.getLogger(__name__)

# A note's columns: (path terms, exact, stems, the three packed for a later delete).
Terms = tuple[str, str, str, bytes]

# Notes a worker analyses per task, and the notes' bytes from which a build uses workers
# (below, starting them costs about what they save).
_CHUNK = 64
PARALLEL_FROM_BYTES = 16 << 20
_HEAD = struct.Struct("<II")
# A 16 KB dictionary at level 3 packs 12% smaller than level 9 without one, in 15% less time
# (bench/search.py's notes); a 32 KB one (zlib's window) packs 2% smaller but takes a third
# longer, mostly in setting the dictionary for each note.
_DICTIONARY_BYTES = 16 << 10
_LEVEL = 3
_PR_SET_PDEATHSIG = 1


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


def note_terms(root: Path, rels: list[str], zdict: bytes) -> list[Terms | None]:
    """The columns of each note, None for one that cannot be read."""
    out: list[Terms | None] = []
    for rel in rels:
        text = read_note(root, rel)
        if text is None:
            out.append(None)
            continue
        path = path_terms(rel)
        exact, stems = document_terms(text)
        out.append((path, exact, stems, pack(path, exact, stems, zdict)))
    return out


def analysed(
    root: Path, rels: Iterable[str], zdict: bytes, workers: int
) -> Generator[Terms | None, None, None]:
    """The columns of each note in order (`note_terms`), analysed in `workers` processes a
    little ahead of the reader, or inline when workers < 2. The workers end when the iterator
    is closed or exhausted: close it (`contextlib.closing`) when stopping early."""
    chunks = _chunks(rels)
    if workers < 2:
        for chunk in chunks:
            yield from note_terms(root, chunk, zdict)
        return
    # Spawned, not forked: the agent has threads, and a fork copies their held locks.
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_start, initargs=(os.getpid(),))
    ahead: deque[tuple[list[str], Future[list[Terms | None]]]] = deque()
    left: list[list[str]] = []
    try:
        for chunk in chunks:
            left = [chunk]  # until the pool has taken it
            ahead.append((chunk, pool.submit(note_terms, root, chunk, zdict)))
            left = []
            if len(ahead) > 2 * workers:
                yield from _next_result(ahead)
        while ahead:
            yield from _next_result(ahead)
    except BrokenProcessPool as exc:
        # A worker died (killed, out of memory, could not start): the rest is done here.
        log.warning("search index: analysing notes inline, a worker process failed: %s", exc)
        left = [chunk for chunk, _ in ahead] + left
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    for chunk in itertools.chain(left, chunks):
        yield from note_terms(root, chunk, zdict)


def _next_result(
    ahead: deque[tuple[list[str], Future[list[Terms | None]]]],
) -> list[Terms | None]:
    found = ahead[0][1].result()
    ahead.popleft()  # only once it has its result: a broken pool leaves the chunk to redo
    return found


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _chunks(rels: Iterable[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    for rel in rels:
        chunk.append(rel)
        if len(chunk) == _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _worker_start(parent: int) -> None:
    # A worker dies with the thread that started it (the build's), so none outlives the agent
    # even when it is killed outright.
    if sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(0)
    # A session of its own: the agent's reaper takes a zombie child in the agent's session for
    # an adopted one and reaps it (tasks/reaper.py); this one is the pool's to join.
    with contextlib.suppress(OSError):
        os.setsid()
