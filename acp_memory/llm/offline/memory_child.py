"""The offline model as the memory child: the subagent's two modes, step by step.

Recall: search the task's keywords in both roots (a listing of both roots when it has none,
or when the search found nothing), read the best hits (or the listed notes whose names match),
follow scope:path links inside them, then report the matching lines as plain facts under
"Already on disk:", or exactly "(no memory hits)". A fact from a note the tools flag (a cited
path not in the workspace) or mark old is reported as `possibly stale: FACT (WHY)`, WHY being
the tools' own lines; where two notes disagree, the newer's line (`recall_report.py`).
Persist, on a trigger (`memory_intent.py`): keep the sentence that carries it in a note of the
global root, or of the project root when the message names the project, workspace or
repository; forget the note (or the lines) that best match such a sentence. Which step a run is
at is read from the conversation alone. Reflect, on a session's transcript: `reflection.py`.
"""

from __future__ import annotations

import json
import re

from acp_memory.llm.offline.child_steps import (
    LINK,
    LISTED_NOTE,
    MAX_READS,
    Exchange,
    Plan,
    exchanges,
    free_name,
    keywords,
    normal,
    note_text,
    read_notes,
    reads,
    search,
    search_hits,
    short_title,
    stems,
)
from acp_memory.llm.offline.memory_intent import Intent, asks_not_to_consult, persist_intent
from acp_memory.llm.offline.recall_report import (
    NO_MEMORY_HITS,
    fact_line,
    note_dates,
    note_flags,
    recall_report,
)
from acp_memory.llm.offline.reflection import reflect_step
from acp_memory.llm.offline.wording import announce, numbered_calls
from acp_memory.llm.types import Message, ToolCall
from acp_memory.text.session_text import is_reflection

MEMORY_CHILD_TOOL = "memory_search"  # offered to the memory subagent, and to no one else
_MAX_LISTS = 6
_LISTED_FOLDER = re.compile(r"^\s+folder\s+(?P<path>.+?)/\s{2}modified", re.MULTILINE)
_PERSIST_TOOL = {"save": "memory_save", "forget": "memory_delete"}


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
        text, calls = reflect_step(task, done, offered)
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


def _recall_step(task: str, done: list[Exchange]) -> tuple[str, Plan]:
    words = keywords(task)
    if not done:
        return "", [search(words, "both")] if words else [("memory_list", {})]
    wanted = stems(" ".join(words))
    hits = search_hits(done)
    attempted = {e.arg("path") for e in done if e.name == "memory_read"}
    if unread := [p for p in hits[:3] if p not in attempted]:
        return "", reads(unread)
    lists = [e for e in done if e.name == "memory_list"]
    if not hits:
        if not lists:
            return "", [("memory_list", {})]
        notes = [m["path"] for e in lists for m in LISTED_NOTE.finditer(e.result)]
        named = [p for p in notes if p not in attempted and stems(_name(p)) & wanted][:3]
        if named:
            return "", reads(named)
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
    notes_read = read_notes(done)
    links = [
        link
        for text in notes_read.values()
        for link in LINK.findall(text)
        if link not in attempted
    ]
    links = list(dict.fromkeys(links))[: max(0, MAX_READS - len(attempted))]
    if links:
        return "", reads(links)
    return recall_report(notes_read, wanted, note_flags(done), note_dates(done)), []


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(":", 1)[-1].rsplit(".", 1)[0]


def _save_step(intent: Intent, done: list[Exchange]) -> tuple[str, Plan]:
    words = keywords(intent.fact)
    root = f"{intent.scope}:"
    if not done:
        # Read first: what is on disk about it, and which names the root already holds.
        calls = [search(words, "both")] if words else []
        return "", [*calls, ("memory_list", {"path": root})]
    attempted = {e.arg("path") for e in done if e.name == "memory_read"}
    if unread := [p for p in search_hits(done)[:3] if p not in attempted]:
        return "", reads(unread)
    saves = [e for e in done if e.name == "memory_save"]
    if saves:
        if saves[-1].failed:  # a refusal, or "the user declined: ..."
            return f"Not saved: {saves[-1].result.removeprefix('Error:').strip()}", []
        if saves[-1].held:
            return f"Not saved yet: {saves[-1].result}", []
        where = "project" if intent.scope == "project" else "global"
        return f"Saved to {where} memory: {intent.fact}", []
    fact = normal(intent.fact)
    if any(fact in normal(text) for text in read_notes(done).values()):
        return f"Verified, skipped: already on disk: {intent.fact}", []
    listing = " ".join(e.result for e in done if e.name == "memory_list")
    taken = {m["path"].removeprefix(root) for m in LISTED_NOTE.finditer(listing)}
    title = short_title(intent.fact)
    args: dict[str, object] = {"title": title, "body": intent.fact + "\n", "scope": intent.scope}
    if (name := free_name(title, taken)) is not None:
        args["relative_path"] = name
    return "", [("memory_save", args)]


def _forget_step(intent: Intent, done: list[Exchange]) -> tuple[str, Plan]:
    words = keywords(intent.fact)
    if not words:
        return f"Nothing deleted: the message names nothing to look for ({intent.fact}).", []
    if not done:
        return "", [search(words, intent.scope)]
    hits = search_hits(done)
    if not hits:
        return f"Nothing deleted: no note matches: {intent.fact}", []
    best = hits[0]
    opened = [e for e in done if e.name == "memory_read"]
    if not opened:
        return "", reads([best])
    changes = [e for e in done if e.name in ("memory_delete", "memory_save")]
    wanted = stems(" ".join(words))
    lines = note_text(opened[0].result)[0].splitlines()
    facts = [f for f in (fact_line(line) for line in lines) if f]
    gone = [f for f in facts if stems(f) & wanted]
    # A best match with no line about it was found by its name: the whole note goes.
    whole = not gone or len(gone) == len(facts)
    if changes:
        if changes[-1].failed:  # a refusal, or "the user declined: ..."
            return f"Not deleted: {changes[-1].result.removeprefix('Error:').strip()}", []
        if changes[-1].held:
            return f"Not deleted yet: {changes[-1].result}", []
        removed = (facts if whole else gone) or [intent.fact]
        return "Deleted:\n" + "\n".join(f"- {line}" for line in removed), []
    if opened[0].failed:
        return f"Not deleted: {opened[0].result.removeprefix('Error:').strip()}", []
    if whole:
        return "", [("memory_delete", {"path": best})]
    kept = [line for line in lines if not (fact_line(line) and stems(line) & wanted)]
    # The note holds other facts too: it is saved again without the forgotten lines.
    scope, _, rel = best.partition(":")
    body = "\n".join(kept).strip() + "\n"
    return "", [
        ("memory_save", {"title": _name(best), "body": body, "scope": scope, "relative_path": rel})
    ]
