"""What the offline memory child's steps share: the run so far read back (each tool call with its
result, the notes read, the search hits), the words worth searching, and the calls and note
names a step writes. Its recall and persist steps (`memory_child.py`) and its reflection
(`reflection.py`) use them; a tidy run's child (`tidy_child.py`) reads its run back the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from acp_memory.llm.offline.wording import arguments
from acp_memory.llm.types import Message
from acp_memory.text.analyze import STOPWORDS, analyze, tokens
from acp_memory.text.naming import name_from_title

HELD = "held for approval ("  # memory/review.py HELD_PREFIX: a change waiting for approval
MAX_READS = 8  # notes one recall opens, links followed included
_TITLE_CHARS = 60
# Words of a recall request that name no subject ("what do you remember about ...").
_EXTRA_STOPWORDS = frozenset(
    """about also any anything can could did don know like me memory memories note notes
    please recall remember should something tell us would
    вспомни есть знаешь какая какие какое какой мой моё мое мои моя меня мне нас наш наша
    наши памяти память помнишь пожалуйста про расскажи скажи эта эти этой этом этот""".split()
)
_HIT = re.compile(r"^\[\d+\] (?P<path>.+) \(score [-+0-9.e]+\)$", re.MULTILINE)
LISTED_NOTE = re.compile(r"^\s+note\s+(?P<path>.+?)\s{2}\d+ bytes", re.MULTILINE)
# `workspace:` is the project root under the name HTTP and the inline tool use.
LINK = re.compile(
    r"(?<![\w/])(?:global|project|workspace):[^\s()\[\]<>\"'`]+?\.(?:md|txt)(?!\w)"
)
# The lines memory_read puts before a note's text, a blank line after them (memory/facts.py).
CHANGED = re.compile(r"^changed (?P<date>\d{4}-\d{2}-\d{2}), (?P<age>[^,]+), by .+?"
                     r"(?P<old> \(old\))?$")
_CITES = re.compile(r"^cites .+: not in the workspace$")


@dataclass(frozen=True)
class Exchange:
    """One tool call of the run and the result that came back for it."""

    name: str
    args: dict[str, object]
    result: str

    @property
    def failed(self) -> bool:
        return self.result.startswith("Error:")

    @property
    def held(self) -> bool:
        """The change waits for the user's approval (memory.review: ask): not made yet."""
        return self.result.startswith(HELD)

    def arg(self, key: str) -> str:
        value = self.args.get(key)
        return value if isinstance(value, str) else ""


def exchanges(messages: Sequence[Message]) -> list[Exchange]:
    """The run's tool calls so far, each with its result, in order."""
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    out: list[Exchange] = []
    for m in messages:
        for call in m.tool_calls if m.role == "assistant" else ():
            args = arguments(call)
            result = results.get(call.id, "")
            out.append(Exchange(call.name, args if isinstance(args, dict) else {}, result))
    return out


def keywords(text: str, limit: int = 8) -> list[str]:
    """The words of text worth searching for: no stop words (English or Russian), no repeats."""
    out: list[str] = []
    for word in tokens(text):
        low = word.lower().replace("ё", "е")
        if len(low) < 2 or low in STOPWORDS or low in _EXTRA_STOPWORDS or low in out:
            continue
        out.append(low)
    return out[:limit]


def stems(text: str) -> set[str]:
    return {s for token in tokens(text) for s in analyze(token).stems}


Call = tuple[str, dict[str, object]]  # a tool's name and its arguments
Plan = list[Call]


def search(query: list[str], scope: str) -> Call:
    return "memory_search", {"query": " ".join(query), "scope": scope}


def reads(paths: Iterable[str]) -> Plan:
    return [("memory_read", {"path": p}) for p in paths]


def search_hits(done: list[Exchange]) -> list[str]:
    found = [m["path"] for e in done if e.name == "memory_search" for m in _HIT.finditer(e.result)]
    return list(dict.fromkeys(found))


def _flags(lines: Iterable[str]) -> list[str]:
    """Why facts under these tool lines may be stale: each gone path, and an old change."""
    out: list[str] = []
    for line in lines:
        if _CITES.match(line):
            out.append(line)
        elif (m := CHANGED.match(line)) and m["old"]:
            out.append(f"changed {m['date']}, {m['age']}")
    return out


def note_text(result: str) -> tuple[str, list[str]]:
    """A memory_read result as the note's own text and its flags (see `_flags`)."""
    head, sep, text = result.partition("\n\n")
    lines = head.splitlines()
    if not sep or not lines or not CHANGED.match(lines[0]):
        return result, []  # no fact lines: the text is the whole result
    return text, _flags(lines)


def read_notes(done: list[Exchange]) -> dict[str, str]:
    return {e.arg("path"): note_text(e.result)[0] for e in done
            if e.name == "memory_read" and not e.failed}


def normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def short_title(fact: str) -> str:
    """A short title from the first words of the fact's first line."""
    text = fact.split("\n", 1)[0].rstrip(" .!?…")
    if len(text) <= _TITLE_CHARS:
        return text
    cut = text[:_TITLE_CHARS].rsplit(" ", 1)[0]
    return cut or text[:_TITLE_CHARS]


def free_name(title: str, taken: set[str]) -> str | None:
    """A file name beside the notes already in the root, or None when the title's own is free."""
    name = name_from_title(title)
    if name not in taken:
        return None
    stem = name.removesuffix(".md")
    n = 2
    while f"{stem}-{n}.md" in taken:
        n += 1
    return f"{stem}-{n}.md"
