"""The offline memory child's reflection on a session's transcript: the lasting statements of
the user's own messages (never a tool result's or the agent's text), each searched first, the
hits read, and saved when no note holds it yet.
"""

from __future__ import annotations

from acp_memory.llm.offline.child_steps import (
    LISTED_NOTE,
    MAX_READS,
    Exchange,
    Plan,
    free_name,
    keywords,
    normal,
    read_notes,
    reads,
    search,
    search_hits,
    short_title,
)
from acp_memory.llm.offline.memory_intent import Intent, lasting_statements
from acp_memory.text.naming import name_from_title
from acp_memory.text.session_text import user_texts

NOTHING_TO_REFLECT = "Nothing new to save."
_MAX_REFLECTED = 12  # facts one reflection keeps


def reflected_facts(task: str) -> list[Intent]:
    """What a reflection's offline run keeps: the lasting statements of the user's own
    messages in its transcript (never a tool result's or the agent's text), no repeats."""
    seen: set[str] = set()
    out: list[Intent] = []
    for message in user_texts(task):
        for intent in lasting_statements(message):
            if (key := normal(intent.fact)) not in seen:
                seen.add(key)
                out.append(intent)
    return out[:_MAX_REFLECTED]


def reflect_step(task: str, done: list[Exchange], offered: set[str]) -> tuple[str, Plan]:
    """A reflection: search each fact, read the hits, save the facts no note holds yet."""
    facts = reflected_facts(task)
    if not facts or "memory_save" not in offered:
        return NOTHING_TO_REFLECT, []
    if not done:
        searches = [search(words, "both") for f in facts if (words := keywords(f.fact))]
        return "", [*searches, ("memory_list", {"path": "global:"}),
                    ("memory_list", {"path": "project:"})]
    attempted = {e.arg("path") for e in done if e.name == "memory_read"}
    if unread := [p for p in search_hits(done) if p not in attempted][: MAX_READS]:
        if len(attempted) < MAX_READS:
            return "", reads(unread)
    saves = [e for e in done if e.name == "memory_save"]
    if saves:
        return "\n".join(_reflected_line(e) for e in saves), []
    on_disk = [normal(text) for text in read_notes(done).values()]
    new = [f for f in facts if not any(normal(f.fact) in text for text in on_disk)]
    if not new:
        return NOTHING_TO_REFLECT, []
    listing = " ".join(e.result for e in done if e.name == "memory_list")
    taken = {m["path"] for m in LISTED_NOTE.finditer(listing)}
    calls: Plan = []
    for fact in new:
        title = short_title(fact.fact)
        root = f"{fact.scope}:"
        names = {t.removeprefix(root) for t in taken if t.startswith(root)}
        name = free_name(title, names) or name_from_title(title)
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
