"""How much two notes say the same words in the same order: the Jaccard overlap of their
3-word shingles. Tidying's duplicate candidates and the offline model's tidy share this one
measure, so both call the same pairs duplicates."""

from __future__ import annotations

from acp_memory.text.analyze import tokens

SHINGLE_WORDS = 3
DUPLICATE_OVERLAP = 0.8  # at or above it, two notes are duplicates


def words(text: str) -> list[str]:
    """The text's words in order, folded as the index folds them (case, ё)."""
    return tokens(text.lower().replace("ё", "е"))


def shingles(folded: list[str]) -> set[tuple[str, ...]]:
    """The runs of SHINGLE_WORDS consecutive words; a shorter text is its one run."""
    if len(folded) < SHINGLE_WORDS:
        return {tuple(folded)} if folded else set()
    return set(zip(*(folded[i:] for i in range(SHINGLE_WORDS)), strict=False))


def overlap(a: set[tuple[str, ...]], b: set[tuple[str, ...]]) -> float:
    """The Jaccard overlap of two shingle sets (0 when both are empty)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def text_overlap(a: str, b: str) -> float:
    """The overlap of two texts' shingles."""
    return overlap(shingles(words(a)), shingles(words(b)))


def is_duplicate(share: float) -> bool:
    """Whether an overlap makes two notes duplicates."""
    return share >= DUPLICATE_OVERLAP - 1e-9  # 4 of 5 shingles is 0.8 exactly
