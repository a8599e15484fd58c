"""The offline model as the memory child: the subagent's two modes, step by step.

Recall: search the task's keywords in both roots (a listing of both roots when it has none,
or when the search found nothing), read the best hits (or the listed notes whose names match),
follow scope:path links inside them, then report the matching lines as plain facts under
"Already on disk:", or exactly "(no memory hits)". A fact from a note the tools flag (a cited
path not in the workspace) or mark old is reported as `possibly stale: FACT (WHY)`, WHY being
the tools' own lines.
Persist, on a trigger (`memory_intent.py`): keep the sentence that carries it in a note of the
global root, or of the project root when the message names the project, workspace or
repository; forget the note (or the lines) that best match such a sentence. Which step a run is
at is read from the conversation alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from acp_memory.llm.offline.memory_intent import (
    Intent,
    asks_not_to_consult,
    lasting_statements,
    persist_intent,
)
from acp_memory.llm.offline.wording import announce, arguments, clip, numbered_calls
from acp_memory.llm.types import Message, ToolCall
from acp_memory.text.analyze import STOPWORDS, analyze, tokens
from acp_memory.text.naming import name_from_title
from acp_memory.text.session_text import is_reflection, user_texts
from acp_memory.text.subjects import Statement, statements

MEMORY_CHILD_TOOL = "memory_search"  # offered to the memory subagent, and to no one else
NO_MEMORY_HITS = "(no memory hits)"
HELD = "held for approval ("  # memory/review.py HELD_PREFIX: a change waiting for approval
_MAX_READS = 8  # notes one recall opens, links followed included
_MAX_LISTS = 6
_MAX_FACTS = 20
_FACT_LIMIT = 2000
_TITLE_CHARS = 60
# Words of a recall request that name no subject ("what do you remember about ...").
_EXTRA_STOPWORDS = frozenset(
    """about also any anything can could did don know like me memory memories note notes
    please recall remember should something tell us would
    вспомни есть знаешь какая какие какое какой мой моё мое мои моя меня мне нас наш наша
    наши памяти память помнишь пожалуйста про расскажи скажи эта эти этой этом этот""".split()
)
_HIT = re.compile(r"^\[\d+\] (?P<path>.+) \(score [-+0-9.e]+\)$", re.MULTILINE)
_LISTED_NOTE = re.compile(r"^\s+note\s+(?P<path>.+?)\s{2}\d+ bytes", re.MULTILINE)
_LISTED_FOLDER = re.compile(r"^\s+folder\s+(?P<path>.+?)/\s{2}modified", re.MULTILINE)
# `workspace:` is the project root under the name HTTP and the inline tool use.
_LINK = re.compile(
    r"(?<![\w/])(?:global|project|workspace):[^\s()\[\]<>\"'`]+?\.(?:md|txt)(?!\w)"
)
# The lines memory_read puts before a note's text, a blank line after them (memory/facts.py).
_CHANGED = re.compile(r"^changed (?P<date>\d{4}-\d{2}-\d{2}), (?P<age>[^,]+), by .+?"
                      r"(?P<old> \(old\))?$")
_CITES = re.compile(r"^cites .+: not in the workspace$")
_MD_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\)")
_NOTE_NAME = re.compile(r"\S+\.(?:md|txt)\b", re.IGNORECASE)
_BULLET = re.compile(r"^(?:[-*+>]|\d+[.)])\s+")


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


def memory_step(conversation: list[Message], offered: set[str]) -> tuple[str, list[ToolCall]]:
    """The memory subagent's next move: the text it says and the tool calls it makes (none
    with its final report)."""
    users = [i for i, m in enumerate(conversation) if m.role == "user"]
    if not users:
        return NO_MEMORY_HITS, []
    start = users[-1]
    task = conversation[start].content
    done = exchanges(conversation[start + 1 :])
    if is_reflection(task):
        text, calls = _reflect_step(task, done, offered)
    elif asks_not_to_consult(task):
        return "Memory not consulted: the user asked not to for this message.", []
    else:
        text, calls = _turn_step(task, done, offered)
    if not calls:
        return text, []
    written = [(name, json.dumps(args, ensure_ascii=False)) for name, args in calls]
    made = numbered_calls(len(conversation), written)
    return announce(made), made


def _turn_step(task: str, done: list[Exchange], offered: set[str]) -> tuple[str, Plan]:
    """A turn's run: persist on a trigger, else recall."""
    intent = persist_intent(task)
    tool = None if intent is None else _PERSIST_TOOL[intent.action]
    if intent is not None and tool in offered:
        step = _save_step if intent.action == "save" else _forget_step
        return step(intent, done)
    text, calls = _recall_step(task, done)
    if intent is not None and not calls:
        # Ask mode: the child recalls, and says the change it was asked for was not made.
        undone = "saved" if intent.action == "save" else "deleted"
        text += f"\nNot {undone}: memory is read-only in ask mode."
    return text, calls


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


def _stems(text: str) -> set[str]:
    return {s for token in tokens(text) for s in analyze(token).stems}


Call = tuple[str, dict[str, object]]  # a tool's name and its arguments
Plan = list[Call]
_PERSIST_TOOL = {"save": "memory_save", "forget": "memory_delete"}


def _search(query: list[str], scope: str) -> Call:
    return "memory_search", {"query": " ".join(query), "scope": scope}


def _reads(paths: Iterable[str]) -> Plan:
    return [("memory_read", {"path": p}) for p in paths]


def _hits(done: list[Exchange]) -> list[str]:
    found = [m["path"] for e in done if e.name == "memory_search" for m in _HIT.finditer(e.result)]
    return list(dict.fromkeys(found))


def _flags(lines: Iterable[str]) -> list[str]:
    """Why facts under these tool lines may be stale: each gone path, and an old change."""
    out: list[str] = []
    for line in lines:
        if _CITES.match(line):
            out.append(line)
        elif (m := _CHANGED.match(line)) and m["old"]:
            out.append(f"changed {m['date']}, {m['age']}")
    return out


def note_text(result: str) -> tuple[str, list[str]]:
    """A memory_read result as the note's own text and its flags (see `_flags`)."""
    head, sep, text = result.partition("\n\n")
    lines = head.splitlines()
    if not sep or not lines or not _CHANGED.match(lines[0]):
        return result, []  # no fact lines: the text is the whole result
    return text, _flags(lines)


def _read_notes(done: list[Exchange]) -> dict[str, str]:
    return {e.arg("path"): note_text(e.result)[0] for e in done
            if e.name == "memory_read" and not e.failed}


def _note_flags(done: list[Exchange]) -> dict[str, list[str]]:
    """Each note read with its flags (the facts reported all come from reads, whose lines are
    those of the search hit, read fresh)."""
    return {e.arg("path"): note_text(e.result)[1] for e in done
            if e.name == "memory_read" and not e.failed}


def _note_dates(done: list[Exchange]) -> dict[str, str]:
    """Each note read with the day it last changed (`YYYY-MM-DD`, from its changed line)."""
    out: dict[str, str] = {}
    for e in done:
        first = e.result.split("\n", 1)[0]
        if e.name == "memory_read" and not e.failed and (m := _CHANGED.match(first)):
            out[e.arg("path")] = m["date"]
    return out


def _recall_step(task: str, done: list[Exchange]) -> tuple[str, Plan]:
    words = keywords(task)
    if not done:
        return "", [_search(words, "both")] if words else [("memory_list", {})]
    wanted = _stems(" ".join(words))
    hits = _hits(done)
    attempted = {e.arg("path") for e in done if e.name == "memory_read"}
    if unread := [p for p in hits[:3] if p not in attempted]:
        return "", _reads(unread)
    lists = [e for e in done if e.name == "memory_list"]
    if not hits:
        if not lists:
            return "", [("memory_list", {})]
        notes = [m["path"] for e in lists for m in _LISTED_NOTE.finditer(e.result)]
        named = [p for p in notes if p not in attempted and _stems(_name(p)) & wanted][:3]
        if named:
            return "", _reads(named)
        listed = {e.arg("path").rstrip("/") for e in lists}
        folders = [
            m["path"]
            for e in lists
            for m in _LISTED_FOLDER.finditer(e.result)
            if m["path"] not in listed and m["path"].count("/") < 2
        ]
        if wanted and folders and not attempted and len(lists) < _MAX_LISTS:
            room = _MAX_LISTS - len(lists)
            return "", [("memory_list", {"path": f}) for f in folders[:room]]
    notes_read = _read_notes(done)
    links = [
        link
        for text in notes_read.values()
        for link in _LINK.findall(text)
        if link not in attempted
    ]
    links = list(dict.fromkeys(links))[: max(0, _MAX_READS - len(attempted))]
    if links:
        return "", _reads(links)
    return recall_report(notes_read, wanted, _note_flags(done), _note_dates(done)), []


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
    lines_of = {path: [c for c in (_fact_line(line) for line in text.splitlines()) if c]
                for path, text in notes.items()}
    said = _Said(lines_of, dates or {})
    facts: list[str] = []
    for path, lines in lines_of.items():
        matching = [line for line in lines if _stems(line) & wanted]
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


def _fact_line(line: str) -> str:
    """A note line as a plain fact: no heading, bullet, link target, path or file name."""
    text = line.strip()
    if not text or text.startswith("#") or set(text) <= set("-*_=`~ "):
        return ""
    text = _BULLET.sub("", text)
    text = _MD_LINK.sub(lambda m: m[1], text)
    text = _LINK.sub("", text)
    text = _NOTE_NAME.sub("", text)
    text = re.sub(r"\s{2,}", " ", text).strip(" ,;:()")
    return text if tokens(text) else ""


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(":", 1)[-1].rsplit(".", 1)[0]


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def _title(fact: str) -> str:
    """A short title from the first words of the fact's first line."""
    text = fact.split("\n", 1)[0].rstrip(" .!?…")
    if len(text) <= _TITLE_CHARS:
        return text
    cut = text[:_TITLE_CHARS].rsplit(" ", 1)[0]
    return cut or text[:_TITLE_CHARS]


def _free_name(title: str, taken: set[str]) -> str | None:
    """A file name beside the notes already in the root, or None when the title's own is free."""
    name = name_from_title(title)
    if name not in taken:
        return None
    stem = name.removesuffix(".md")
    n = 2
    while f"{stem}-{n}.md" in taken:
        n += 1
    return f"{stem}-{n}.md"


def _save_step(intent: Intent, done: list[Exchange]) -> tuple[str, Plan]:
    words = keywords(intent.fact)
    root = f"{intent.scope}:"
    if not done:
        # Read first: what is on disk about it, and which names the root already holds.
        calls = [_search(words, "both")] if words else []
        return "", [*calls, ("memory_list", {"path": root})]
    attempted = {e.arg("path") for e in done if e.name == "memory_read"}
    if unread := [p for p in _hits(done)[:3] if p not in attempted]:
        return "", _reads(unread)
    saves = [e for e in done if e.name == "memory_save"]
    if saves:
        if saves[-1].failed:  # a refusal, or "the user declined: ..."
            return f"Not saved: {saves[-1].result.removeprefix('Error:').strip()}", []
        if saves[-1].held:
            return f"Not saved yet: {saves[-1].result}", []
        where = "project" if intent.scope == "project" else "global"
        return f"Saved to {where} memory: {intent.fact}", []
    fact = _normal(intent.fact)
    if any(fact in _normal(text) for text in _read_notes(done).values()):
        return f"Verified, skipped: already on disk: {intent.fact}", []
    listing = " ".join(e.result for e in done if e.name == "memory_list")
    taken = {m["path"].removeprefix(root) for m in _LISTED_NOTE.finditer(listing)}
    title = _title(intent.fact)
    args: dict[str, object] = {"title": title, "body": intent.fact + "\n", "scope": intent.scope}
    if (name := _free_name(title, taken)) is not None:
        args["relative_path"] = name
    return "", [("memory_save", args)]


def _forget_step(intent: Intent, done: list[Exchange]) -> tuple[str, Plan]:
    words = keywords(intent.fact)
    if not words:
        return f"Nothing deleted: the message names nothing to look for ({intent.fact}).", []
    if not done:
        return "", [_search(words, intent.scope)]
    hits = _hits(done)
    if not hits:
        return f"Nothing deleted: no note matches: {intent.fact}", []
    best = hits[0]
    reads = [e for e in done if e.name == "memory_read"]
    if not reads:
        return "", _reads([best])
    changes = [e for e in done if e.name in ("memory_delete", "memory_save")]
    wanted = _stems(" ".join(words))
    lines = note_text(reads[0].result)[0].splitlines()
    facts = [f for f in (_fact_line(line) for line in lines) if f]
    gone = [f for f in facts if _stems(f) & wanted]
    # A best match with no line about it was found by its name: the whole note goes.
    whole = not gone or len(gone) == len(facts)
    if changes:
        if changes[-1].failed:  # a refusal, or "the user declined: ..."
            return f"Not deleted: {changes[-1].result.removeprefix('Error:').strip()}", []
        if changes[-1].held:
            return f"Not deleted yet: {changes[-1].result}", []
        removed = (facts if whole else gone) or [intent.fact]
        return "Deleted:\n" + "\n".join(f"- {line}" for line in removed), []
    if reads[0].failed:
        return f"Not deleted: {reads[0].result.removeprefix('Error:').strip()}", []
    if whole:
        return "", [("memory_delete", {"path": best})]
    kept = [line for line in lines if not (_fact_line(line) and _stems(line) & wanted)]
    # The note holds other facts too: it is saved again without the forgotten lines.
    scope, _, rel = best.partition(":")
    body = "\n".join(kept).strip() + "\n"
    return "", [
        ("memory_save", {"title": _name(best), "body": body, "scope": scope, "relative_path": rel})
    ]


NOTHING_TO_REFLECT = "Nothing new to save."
_MAX_REFLECTED = 12  # facts one reflection keeps


def reflected_facts(task: str) -> list[Intent]:
    """What a reflection's offline run keeps: the lasting statements of the user's own
    messages in its transcript (never a tool result's or the agent's text), no repeats."""
    seen: set[str] = set()
    out: list[Intent] = []
    for message in user_texts(task):
        for intent in lasting_statements(message):
            if (key := _normal(intent.fact)) not in seen:
                seen.add(key)
                out.append(intent)
    return out[:_MAX_REFLECTED]


def _reflect_step(task: str, done: list[Exchange], offered: set[str]) -> tuple[str, Plan]:
    """A reflection: search each fact, read the hits, save the facts no note holds yet."""
    facts = reflected_facts(task)
    if not facts or "memory_save" not in offered:
        return NOTHING_TO_REFLECT, []
    if not done:
        searches = [_search(words, "both") for f in facts if (words := keywords(f.fact))]
        return "", [*searches, ("memory_list", {"path": "global:"}),
                    ("memory_list", {"path": "project:"})]
    attempted = {e.arg("path") for e in done if e.name == "memory_read"}
    if unread := [p for p in _hits(done) if p not in attempted][: _MAX_READS]:
        if len(attempted) < _MAX_READS:
            return "", _reads(unread)
    saves = [e for e in done if e.name == "memory_save"]
    if saves:
        return "\n".join(_reflected_line(e) for e in saves), []
    on_disk = [_normal(text) for text in _read_notes(done).values()]
    new = [f for f in facts if not any(_normal(f.fact) in text for text in on_disk)]
    if not new:
        return NOTHING_TO_REFLECT, []
    listing = " ".join(e.result for e in done if e.name == "memory_list")
    taken = {m["path"] for m in _LISTED_NOTE.finditer(listing)}
    calls: Plan = []
    for fact in new:
        title = _title(fact.fact)
        root = f"{fact.scope}:"
        names = {t.removeprefix(root) for t in taken if t.startswith(root)}
        name = _free_name(title, names) or name_from_title(title)
        taken.add(root + name)
        calls.append(("memory_save", {"title": title, "body": fact.fact + "\n",
                                      "scope": fact.scope, "relative_path": name}))
    return "", calls


def _reflected_line(save: Exchange) -> str:
    fact = save.arg("body").strip()
    if save.failed:
        return f"Not saved: {save.result.removeprefix('Error:').strip()}"
    if save.held:
        return f"Not saved yet: {save.result}"
    return f"Saved to {save.arg('scope')} memory: {fact}"
