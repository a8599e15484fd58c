"""The offline memory child's recall report: the matching lines of the notes read as plain
facts, a flagged or old note's as `possibly stale: FACT (WHY)`, and where two notes give one
subject two values, the newer's line in place of the older's, ending
`(newer than a note of DATE that says VALUE)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from acp_memory.llm.offline.child_steps import CHANGED, LINK, Exchange, note_text, stems
from acp_memory.llm.offline.wording import clip
from acp_memory.text.analyze import tokens
from acp_memory.text.subjects import Statement, statements

NO_MEMORY_HITS = "(no memory hits)"
_MAX_FACTS = 20
_FACT_LIMIT = 2000
_MD_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\)")
_NOTE_NAME = re.compile(r"\S+\.(?:md|txt)\b", re.IGNORECASE)
_BULLET = re.compile(r"^(?:[-*+>]|\d+[.)])\s+")


def note_flags(done: list[Exchange]) -> dict[str, list[str]]:
    """Each note read with its flags (the facts reported all come from reads, whose lines are
    those of the search hit, read fresh)."""
    return {e.arg("path"): note_text(e.result)[1] for e in done
            if e.name == "memory_read" and not e.failed}


def note_dates(done: list[Exchange]) -> dict[str, str]:
    """Each note read with the day it last changed (`YYYY-MM-DD`, from its changed line)."""
    out: dict[str, str] = {}
    for e in done:
        first = e.result.split("\n", 1)[0]
        if e.name == "memory_read" and not e.failed and (m := CHANGED.match(first)):
            out[e.arg("path")] = m["date"]
    return out


def recall_report(
    notes: dict[str, str],
    wanted: set[str],
    flags: dict[str, list[str]] | None = None,
    dates: dict[str, str] | None = None,
) -> str:
    """The matching lines of the notes read, as plain facts, those of a flagged or old note
    as `possibly stale: FACT (WHY)`; exactly (no memory hits) when there are none. Where two
    notes give one subject two values, the newer's line stands (ending with `(newer than a
    note of DATE that says VALUE)`) in place of the older's."""
    lines_of = {path: [c for c in (fact_line(line) for line in text.splitlines()) if c]
                for path, text in notes.items()}
    said = _Said(lines_of, dates or {})
    facts: list[str] = []
    for path, lines in lines_of.items():
        matching = [line for line in lines if stems(line) & wanted]
        # A note found by its name or through a link is on the subject even when no line
        # repeats the words: its first fact stands for it.
        for fact_path, line in said.current(path, matching or lines[:1]):
            fact = line
            if why := (flags or {}).get(fact_path):
                fact = f"possibly stale: {line} ({'; '.join(why)})"
            facts.append(fact + said.older(fact_path, line))
    unique = list(dict.fromkeys(facts))[:_MAX_FACTS]
    if not unique:
        return NO_MEMORY_HITS
    return "Already on disk:\n" + "\n".join(f"- {clip(f, _FACT_LIMIT)}" for f in unique)


@dataclass(frozen=True)
class _Stated:
    """A statement one fact line of a dated note makes."""

    date: str  # YYYY-MM-DD: days order notes, as the tools' changed lines give them
    path: str
    line: str
    statement: Statement


class _Said:
    """The subjects the notes read give values, to tell a note's fact from one a newer note
    changed. Notes changed the same day are not ordered: both stay, as neither is newer."""

    def __init__(self, lines_of: dict[str, list[str]], dates: dict[str, str]) -> None:
        self._by_subject: dict[str, list[_Stated]] = {}
        for path, lines in lines_of.items():
            if (date := dates.get(path)) is None:
                continue
            for line in lines:
                for st in statements(line):
                    self._by_subject.setdefault(st.subject, []).append(
                        _Stated(date, path, line, st))

    def _others(self, path: str, line: str) -> list[tuple[_Stated, _Stated]]:
        """(this line's statement, another note's of the same subject with another value)."""
        pairs: list[tuple[_Stated, _Stated]] = []
        for st in statements(line):
            mine = next((s for s in self._by_subject.get(st.subject, ())
                         if s.path == path and s.line == line), None)
            if mine is None:
                continue
            pairs += [(mine, other) for other in self._by_subject[st.subject]
                      if other.path != path and other.statement.value != st.value]
        return pairs

    def current(self, path: str, lines: list[str]) -> list[tuple[str, str]]:
        """The lines as (note, line), a line a newer note contradicts replaced by the newest
        such note's line."""
        out: list[tuple[str, str]] = []
        for line in lines:
            newer = [other for mine, other in self._others(path, line)
                     if other.date > mine.date]
            if newer:
                newest = max(newer, key=lambda s: s.date)
                out.append((newest.path, newest.line))
            else:
                out.append((path, line))
        return out

    def older(self, path: str, line: str) -> str:
        """` (newer than a note of DATE that says VALUE)` for each subject of the line an
        older note gave another value (the newest of them), else nothing."""
        latest: dict[str, _Stated] = {}
        for mine, other in self._others(path, line):
            subject = mine.statement.subject
            if other.date < mine.date and (subject not in latest
                                           or other.date > latest[subject].date):
                latest[subject] = other
        return "".join(f" (newer than a note of {o.date} that says {o.statement.said})"
                       for o in latest.values())


def fact_line(line: str) -> str:
    """A note line as a plain fact: no heading, bullet, link target, path or file name."""
    text = line.strip()
    if not text or text.startswith("#") or set(text) <= set("-*_=`~ "):
        return ""
    text = _BULLET.sub("", text)
    text = _MD_LINK.sub(lambda m: m[1], text)
    text = LINK.sub("", text)
    text = _NOTE_NAME.sub("", text)
    text = re.sub(r"\s{2,}", " ", text).strip(" ,;:()")
    return text if tokens(text) else ""
