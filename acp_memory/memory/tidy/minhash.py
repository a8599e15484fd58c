"""Pairs of notes that may be near duplicates, without comparing every pair: MinHash signatures
of their 3-word shingles, bucketed by LSH bands. Two notes whose shingles overlap 0.8 share a
band's bucket with probability 1 - (1 - 0.8^4)^16 > 0.999; each pair found is only a candidate,
which the caller verifies by its exact overlap.

Hashes are crc32 of each word (never Python's salted `hash`), so a root gives the same pairs in
every run.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

BANDS = 16
ROWS = 4  # rows per band: BANDS * ROWS hash functions
CHUNK = 1 << 15  # shingles hashed at once: CHUNK * BANDS * ROWS * 8 bytes of work memory
BUCKET_PAIRS = 32  # past this many notes a bucket links each to the next only

U64 = npt.NDArray[np.uint64]
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_ONE = np.uint64(1)


def _permutations() -> tuple[U64, U64]:
    seeds = np.random.default_rng(29)  # fixed: the same signatures in every run
    size = BANDS * ROWS
    odd = seeds.integers(0, 2**63, size, dtype=np.uint64) * np.uint64(2) + _ONE
    return odd, seeds.integers(0, 2**63, size, dtype=np.uint64)


_A, _B = _permutations()


def _mix(x: U64) -> U64:
    # splitmix64's finaliser, so that nearby inputs land far apart before the permutations.
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


class WordHashes(dict[str, int]):
    """Each word's crc32, computed once per word however many notes hold it."""

    def __missing__(self, word: str) -> int:
        found = self[word] = zlib.crc32(word.encode("utf-8"))
        return found


def shingle_hashes(folded: Sequence[str], hashes: WordHashes) -> U64:
    """One 64-bit hash per run of three words (a shorter text: one for all of it)."""
    if len(folded) < 3:
        whole = zlib.crc32(" ".join(folded).encode("utf-8")) if folded else None
        return _mix(np.array([] if whole is None else [whole], dtype=np.uint64))
    ids = np.fromiter(map(hashes.__getitem__, folded), dtype=np.uint64, count=len(folded))
    with np.errstate(over="ignore"):
        return _mix((ids[:-2] << np.uint64(32)) ^ (ids[1:-1] * _M1) ^ ids[2:])


def signatures(notes: Sequence[U64]) -> U64:
    """The MinHash signature of each note's shingle hashes: one row of BANDS * ROWS minima;
    a note without shingles gets a row of its own that matches no other."""
    size = BANDS * ROWS
    out = np.full((len(notes), size), np.iinfo(np.uint64).max, dtype=np.uint64)
    lengths = np.array([len(n) for n in notes], dtype=np.int64)
    owners = np.repeat(np.arange(len(notes)), lengths)
    flat = np.concatenate(notes) if notes else np.empty(0, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for start in range(0, len(flat), CHUNK):
            part = flat[start:start + CHUNK]
            who = owners[start:start + CHUNK]
            hashed = part[:, None] * _A[None, :] + _B[None, :]
            # Rows of one note are contiguous: the minimum over each run of rows.
            starts = np.flatnonzero(np.r_[True, who[1:] != who[:-1]])
            np.minimum.at(out, who[starts], np.minimum.reduceat(hashed, starts, axis=0))
    for i in np.flatnonzero(lengths == 0):
        out[i] = np.uint64(i)  # an empty note equals nothing
    return out


def candidate_pairs(sigs: U64) -> set[tuple[int, int]]:
    """Pairs (i < j) of rows that agree on every row of at least one band."""
    pairs: set[tuple[int, int]] = set()
    with np.errstate(over="ignore"):
        for band in range(BANDS):
            cols = sigs[:, band * ROWS:(band + 1) * ROWS]
            keys = _mix(cols[:, 0])
            for c in range(1, ROWS):
                keys = _mix(keys ^ cols[:, c])
            order = np.argsort(keys, kind="stable")
            ordered = keys[order]
            same = np.flatnonzero(ordered[1:] == ordered[:-1])
            if not len(same):
                continue
            # Runs of equal keys: each run is one bucket.
            run_starts = same[np.r_[True, same[1:] != same[:-1] + 1]]
            for start in run_starts:
                end = start + 1
                while end < len(ordered) and ordered[end] == ordered[start]:
                    end += 1
                _bucket_pairs(sorted(int(i) for i in order[start:end]), pairs)
    return pairs


def _bucket_pairs(members: list[int], pairs: set[tuple[int, int]]) -> None:
    if len(members) <= BUCKET_PAIRS:
        pairs.update((a, b) for i, a in enumerate(members) for b in members[i + 1:])
    else:  # a crowd of equal notes (empty templates): a chain still joins them in one group
        pairs.update(itertools.pairwise(members))
