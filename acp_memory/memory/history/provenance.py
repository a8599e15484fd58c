"""When a note last changed and who changed it, as tool results show it: from the journal
when the note's bytes are what its last journaled change left, else its file time, by
`hand edit`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from acp_memory.memory.history.journal import Journal, JournalError
from acp_memory.memory.history.journals import Journals
from acp_memory.memory.history.records import Change
from acp_memory.memory.history.states import digest, member, note_hash
from acp_memory.timestamps import parse_iso

OLD_DAYS = 90  # a fact last changed longer ago than this is old
HAND_EDIT = "hand edit"


@dataclass(frozen=True)
class Provenance:
    changed: datetime
    source: str  # a surface (memory_run, cli, ...) or "hand edit"
    change_id: str | None = None

    def days(self, now: datetime) -> int:
        return max((now - self.changed).days, 0)

    def is_old(self, now: datetime) -> bool:
        return self.days(now) > OLD_DAYS

    def describe(self, now: datetime) -> str:
        """`changed 2026-03-02, 9 months ago, by memory_run`."""
        return (f"changed {self.changed.date().isoformat()}, {age(self.days(now))}, "
                f"by {self.source}")


def age(days: int) -> str:
    """`today`, `N days ago` (under two months) or `N months ago`."""
    if days == 0:
        return "today"
    if days < 60:
        return "1 day ago" if days == 1 else f"{days} days ago"
    return f"{days // 30} months ago"


def provenance(journal: Journal | Journals | None, root: Path, rel: str, data: bytes,
               mtime: float) -> Provenance:
    """Where the note at rel of root, holding data, came from."""
    return provenances(journal, [(root, rel, data, mtime)])[0]


def provenances(journal: Journal | Journals | None,
                notes: Sequence[tuple[Path, str, bytes, float]]) -> list[Provenance]:
    """`provenance` of each (root, rel, data, mtime), asking the journal once for all."""
    by_hand = [Provenance(datetime.fromtimestamp(mtime, UTC), HAND_EDIT)
               for _, _, _, mtime in notes]
    if journal is None:
        return by_hand
    try:
        lasts, manifests = journal.last_of_each([(root, rel) for root, rel, _, _ in notes])
    except JournalError:
        return by_hand

    def blob(h: str) -> bytes:
        return manifests[h] if h in manifests else journal.blob(h)

    return [_from(blob, last, rel, data, hand)
            for (_, rel, data, _), last, hand in zip(notes, lasts, by_hand, strict=True)]


def _from(blob: Callable[[str], bytes], last: Change | None, rel: str, data: bytes,
          by_hand: Provenance) -> Provenance:
    """The change last, when it left the note's bytes as they are; else by_hand."""
    if last is None:
        return by_hand
    inside = rel[len(last.path):].lstrip("/") if last.path != rel else ""
    try:
        if note_hash(member(last.after, inside, blob)) != digest(data):
            return by_hand
    except JournalError:
        return by_hand
    return Provenance(parse_iso(last.time), last.source.surface, last.id)
