"""The built-in offline model: deterministic, no network, no key.

It answers from what it received and says plainly what it is. It also drives tools on request,
so the whole loop can be seen without a provider: a line `/tool NAME {"arg": "value"}` in the
user's message makes it call that tool (arguments default to {}), and once the results are back
it reports them. For measuring the wire, a line `/stream N` (N up to 1,000,000) makes it stream
N short chunks `w0 `, `w1 `, … as its answer instead. When the turn context after the history
carries a "## Long-term memory" report, its answer repeats it under "From memory:".

Offered the memory tools (`memory_search` among them), it is the memory subagent instead, and
follows the subagent's two modes deterministically (see `memory_step`). Like every model it
keeps no state between requests: which step a run is at is read from the conversation alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass

import anyio

from acp_memory.llm.types import (
    ChatRequest,
    Finished,
    Message,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
)
from acp_memory.text.analyze import STOPWORDS, analyze, tokens
from acp_memory.text.naming import name_from_title

_WORD = re.compile(r"\S+\s*")
_DIRECTIVE = re.compile(r"^\s*/tool\s+(?P<name>[\w.-]+)\s*(?P<args>\{.*\})?\s*$", re.MULTILINE)
_STREAM = re.compile(r"^\s*/stream\s+(?P<count>\d{1,7})\s*$", re.MULTILINE)
_QUOTE_LIMIT = 400
_MAX_STREAM = 1_000_000
MEMORY_SECTION = "## Long-term memory"
NO_MEMORY_HITS = "(no memory hits)"


class OfflineProvider:
    """Answers from what it received, and says plainly what it is."""

    name = "offline"

    def __init__(self, delay_ms: int = 0) -> None:
        # Lets a person or a browser test watch a run in flight; 0 answers at once.
        self.delay_s = max(0, delay_ms) / 1000

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        if self.delay_s:
            await anyio.sleep(self.delay_s)  # a sleep, so that a cancel ends it at once
        # The messages past the cacheable prefix are runtime state (the turn context), not
        # conversation: the offline model answers the conversation alone.
        split = request.cache_prefix_len or len(request.messages)
        conversation = [m for m in request.messages[:split] if m.role != "system"]
        offered = {t.name for t in request.tools}
        calls: list[ToolCall]
        count: int | None = None
        if MEMORY_CHILD_TOOL in offered:
            text, calls = memory_step(conversation, offered)
        else:
            calls = tool_calls_requested(conversation)
            count = stream_requested(conversation)
            text = _calling(calls) if calls else compose_reply(conversation)
            memory = memory_report(request.messages[split:])
            if memory and not calls and not _trailing_results(conversation):
                text += f"\nFrom memory:\n{memory}"
        pieces: Iterable[str]
        pieces = (f"w{i} " for i in range(count)) if count is not None else _WORD.findall(text)
        output = 0
        for piece in pieces:
            # A checkpoint per word keeps the stream cancellable and interleaved like a real one.
            await anyio.lowlevel.checkpoint()
            output += len(piece)
            yield TextDelta(piece)
        for call in calls:
            yield ToolCallReady(call)
        usage = Usage(input_tokens=_count(request.messages), output_tokens=output // 4)
        yield Finished("tool_calls" if calls else "stop", usage)


def tool_calls_requested(conversation: list[Message]) -> list[ToolCall]:
    """The `/tool` lines of the user's newest message, unless they were already answered."""
    if not conversation or conversation[-1].role != "user":
        return []
    step = len(conversation)
    return [
        ToolCall(f"offline_{step}_{i}", m["name"], m["args"] or "{}")
        for i, m in enumerate(_DIRECTIVE.finditer(conversation[-1].content))
    ]


def stream_requested(conversation: list[Message]) -> int | None:
    """N from a `/stream N` line of the user's newest message, else None."""
    if not conversation or conversation[-1].role != "user":
        return None
    match = _STREAM.search(conversation[-1].content)
    return None if match is None else min(int(match["count"]), _MAX_STREAM)


def memory_report(tail: Sequence[Message]) -> str | None:
    """The memory report of the turn context (the last message), unless there is none or it
    found nothing."""
    if not tail or tail[-1].role != "user":
        return None
    text = tail[-1].content
    at = text.find(MEMORY_SECTION + "\n")
    if at < 0:
        return None
    # The memory section is the block's last, so it runs to the closing tag.
    report = text[at + len(MEMORY_SECTION) :].rsplit("</turn_context>", 1)[0].strip()
    return None if not report or report == NO_MEMORY_HITS else report


def compose_reply(conversation: list[Message]) -> str:
    """The offline model's answer: tool results when they just came back, else an echo."""
    results = _trailing_results(conversation)
    if results:
        return "\n".join(
            f"The tool {m.name} returned:\n{_clip(m.content, _QUOTE_LIMIT)}" for m in results
        )
    users = [m for m in conversation if m.role == "user"]
    last = users[-1].content.strip() if users else ""
    turn = len(users)
    lines = [
        "I am the built-in offline model of acp-memory: no network and no API key, "
        "so I can only answer from what I received.",
        f'You said: "{_clip(last, _QUOTE_LIMIT)}"' if last else "Your message was empty.",
        f"This is message {turn} of our conversation.",
    ]
    if turn > 1:
        lines.append(f'Your previous message was: "{_clip(users[-2].content.strip())}"')
    return "\n".join(lines)


def _calling(calls: list[ToolCall]) -> str:
    names = ", ".join(f"{c.name} {json.dumps(_args(c), ensure_ascii=False)}" for c in calls)
    return f"Calling {names}."


def _args(call: ToolCall) -> object:
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments


def _trailing_results(conversation: list[Message]) -> list[Message]:
    results: list[Message] = []
    for m in reversed(conversation):
        if m.role != "tool":
            break
        results.append(m)
    return results[::-1]


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _count(messages: list[Message]) -> int:
    return sum(len(m.content) for m in messages) // 4


# -- the memory subagent ----------------------------------------------------------------------
#
# Recall: search the task's keywords in both roots (a listing of both roots when it has none,
# or when the search found nothing), read the best hits (or the listed notes whose names match),
# follow scope:path links inside them, then report the matching lines as plain facts under
# "Already on disk:", or exactly "(no memory hits)".
# Persist, on a trigger: keep the sentence that carries it (the trigger phrase removed) in a
# note of the global root, or of the project root when the message names the project,
# workspace or repository; forget the note (or the lines) that best match such a sentence.

MEMORY_CHILD_TOOL = "memory_search"  # offered to the memory subagent, and to no one else
_MAX_READS = 8  # notes one recall opens, links followed included
_MAX_LISTS = 6
_MAX_FACTS = 20
_FACT_LIMIT = 2000
_TITLE_CHARS = 60

# Imperative triggers, matched at the start of a sentence or of a clause ("For this project,
# remember that ..."), after a few polite lead words. "save" and "delete" (and their Russian
# forms) also need the sentence to name memory or notes: "save the file" or "delete the build
# folder" is a request for the main agent, and must not write or remove a note.
_LEAD = (
    r"(?:(?:please|pls|ok|okay|also|and|now|(?:can|could|would|will)\s+you(?:\s+please)?"
    r"|пожалуйста|также|ещё|еще|и|а|теперь|давай)[\s,]+)*"
)
_KEEP = r"remember|keep\s+in\s+mind|note\s+that|make\s+a\s+note|запомни(?:те)?"
_SAVE = r"save|сохрани(?:те)?"
_FORGET = r"forget|забудь(?:те)?"
_DELETE = r"delete|удали(?:те)?"
_TRIGGER = re.compile(
    r"(?:^|(?<=[,;:—–]))\s*(?P<lead>" + _LEAD + r")"
    rf"(?:(?P<keep>{_KEEP})|(?P<save>{_SAVE})|(?P<forget>{_FORGET})|(?P<delete>{_DELETE}))"
    r"(?!\w)",
    re.IGNORECASE,
)
_MEMORY_WORDS = re.compile(
    r"\b(?:memory|memories|notes?)\b|памят|заметк", re.IGNORECASE
)
_MEMORY_TARGET = (
    r"(?:(?:to|in|into|from)\s+(?:your\s+|the\s+|my\s+)?(?:long-term\s+)?(?:memory|notes)"
    r"|(?:в|из)\s+(?:памят\w*|заметк\w*))"
)
_AFTER_TRIGGER = re.compile(
    rf"^[\s,:;—–-]*(?:{_MEMORY_TARGET})?[\s,:;—–-]*(?:(?:that|что)(?!\w))?[\s,:;—–-]*",
    re.IGNORECASE,
)
_TRAILING_TARGET = re.compile(rf"\s*{_MEMORY_TARGET}\s*(?=[.!?…]*$)", re.IGNORECASE)
_PROJECT = re.compile(
    r"\b(?:project|workspace|repo|repository)\b|проект|репозитори|рабоч\w*\s+пространств",
    re.IGNORECASE,
)
_SKIP = re.compile(
    r"\b(?:don['’]?t|do\s+not|never)\s+(?:consult|use|check|search|look\s+(?:at|in|into)|read)"
    r"\s+(?:the\s+|your\s+|my\s+|any\s+)?(?:long-term\s+)?(?:memory|notes)\b"
    r"|\bwithout\s+(?:the\s+|your\s+|any\s+)?(?:long-term\s+)?memory\b"
    r"|не\s+(?:смотри|заглядывай|используй|трогай|проверяй)\s+(?:в\s+)?(?:памят|заметк)\w*"
    r"|без\s+памяти",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?…])\s+|\n+")
# Evident intent: a message meant to last that gives no order ("… this fact should be
# remembered for future sessions"). A clause saying only that is dropped from the saved
# sentence (the rest kept verbatim); a rule's own adverb ("from now on") stays in it.
_LASTING = re.compile(
    r"\bshould\s+be\s+(?:remembered|kept)\b|\bfor\s+(?:all\s+)?future\s+sessions\b"
    r"|\bkeep\s+(?:this|it|that)\s+in\s+(?:mind|memory)\b|\bfor\s+later\b"
    r"|\bна\s+будущее\b|\bдля\s+будущих\s+сесси\w*",
    re.IGNORECASE,
)
_RULE = re.compile(r"\bfrom\s+now\s+on\b|\bgoing\s+forward\b|\bвпредь\b|\bотныне\b", re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"[,;:—–()]")
# The words a clause that only asks for remembering is made of.
_ASKING_WORDS = frozenset(
    """a all be fact facts for future in info information it keep kept know later memory
    mind please remember remembered session sessions should that the these this
    будущее будущих для запомнить знать на надо нужно помнить пожалуйста сессии сессий
    следует сохранить это этот эта""".split()
)
_EXTRA_STOPWORDS = frozenset(
    """about also any anything can could did don know like me memory memories note notes
    please recall remember should something tell us would
    вспомни есть знаешь какая какие какое какой мой моё мое мои моя меня мне нас наш наша
    наши памяти память помнишь пожалуйста про расскажи скажи эта эти этой этом этот""".split()
)
_HIT = re.compile(r"^\[\d+\] (?P<path>.+) \(score [-+0-9.e]+\)$", re.MULTILINE)
_LISTED_NOTE = re.compile(r"^\s+note\s+(?P<path>.+?)\s{2}\d+ bytes", re.MULTILINE)
_LISTED_FOLDER = re.compile(r"^\s+folder\s+(?P<path>.+?)/\s{2}modified", re.MULTILINE)
_LINK = re.compile(r"(?<![\w/])(?:global|project):[^\s()\[\]<>\"'`]+?\.(?:md|txt)(?!\w)")
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

    def arg(self, key: str) -> str:
        value = self.args.get(key)
        return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Intent:
    """A persist request: keep or forget `fact`, in `scope`."""

    action: str  # "save" or "forget"
    fact: str
    scope: str  # global or project; "both" when forgetting without naming the project


def memory_step(conversation: list[Message], offered: set[str]) -> tuple[str, list[ToolCall]]:
    """The memory subagent's next move: the text it says and the tool calls it makes (none
    with its final report)."""
    users = [i for i, m in enumerate(conversation) if m.role == "user"]
    if not users:
        return NO_MEMORY_HITS, []
    start = users[-1]
    task = conversation[start].content
    done = exchanges(conversation[start + 1 :])
    if _SKIP.search(task):
        return "Memory not consulted: the user asked not to for this message.", []
    intent = persist_intent(task)
    tool = None if intent is None else _PERSIST_TOOL[intent.action]
    if intent is not None and tool in offered:
        step = _save_step if intent.action == "save" else _forget_step
        text, calls = step(intent, done)
    else:
        text, calls = _recall_step(task, done)
        if intent is not None and not calls:
            # Ask mode: the child recalls, and says the change it was asked for was not made.
            undone = "saved" if intent.action == "save" else "deleted"
            text += f"\nNot {undone}: memory is read-only in ask mode."
    if not calls:
        return text, []
    step_no = len(conversation)
    made = [
        ToolCall(f"offline_{step_no}_{i}", name, json.dumps(args, ensure_ascii=False))
        for i, (name, args) in enumerate(calls)
    ]
    return _calling(made), made


def exchanges(messages: Sequence[Message]) -> list[Exchange]:
    """The run's tool calls so far, each with its result, in order."""
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    out: list[Exchange] = []
    for m in messages:
        for call in m.tool_calls if m.role == "assistant" else ():
            args = _args(call)
            result = results.get(call.id, "")
            out.append(Exchange(call.name, args if isinstance(args, dict) else {}, result))
    return out


def persist_intent(task: str) -> Intent | None:
    """The first sentence that asks to keep or forget something, as an Intent."""
    sentences = [s.strip() for s in _SENTENCE.split(task) if s.strip()]
    for i, sentence in enumerate(sentences):
        match = _TRIGGER.search(sentence)
        if match is None:
            continue
        needs_memory = match["save"] or match["delete"]
        if needs_memory and not _MEMORY_WORDS.search(sentence):
            continue
        rest = _AFTER_TRIGGER.sub("", sentence[match.end() :], count=1)
        before = sentence[: match.start()].rstrip()  # "For this project," stays
        fact = _TRAILING_TARGET.sub("", f"{before} {rest}".strip()).strip()
        if not _words(fact) and i + 1 < len(sentences):
            fact = sentences[i + 1]  # "Remember this:" with the fact on the next line
        if not _words(fact):
            continue
        fact = fact[0].upper() + fact[1:]
        if fact.endswith("?") and re.search(r"\byou\b", match["lead"], re.IGNORECASE):
            fact = fact[:-1] + "."  # "Can you remember that I drink tea?" keeps a statement
        action = "save" if match["keep"] or match["save"] else "forget"
        named = _PROJECT.search(task) is not None
        scope = "project" if named else ("global" if action == "save" else "both")
        return Intent(action, fact, scope)
    lasting = _lasting_fact(sentences)
    if lasting is None:
        return None
    return Intent("save", lasting, "project" if _PROJECT.search(task) else "global")


def _lasting_fact(sentences: list[str]) -> str | None:
    """The fact of the first sentence whose evident intent is to last (see _LASTING)."""
    for i, sentence in enumerate(sentences):
        if sentence.endswith("?"):
            continue
        match = _LASTING.search(sentence)
        if match is None:
            if _RULE.search(sentence):
                return sentence
            continue
        fact = _without_asking_clause(sentence, match)
        if not _words(fact):
            # "This should be remembered for future sessions." after (or before) the fact.
            near = [s for s in (sentences[i - 1 : i] + sentences[i + 1 : i + 2]) if _words(s)]
            fact = next((s for s in near if not s.endswith("?")), "")
        if _words(fact):
            return fact[0].upper() + fact[1:]
    return None


def _without_asking_clause(sentence: str, match: re.Match[str]) -> str:
    """The sentence without the clause around `match` when that clause only asks for
    remembering; the whole sentence otherwise."""
    breaks = [m.start() for m in _CLAUSE_BREAK.finditer(sentence)]
    start = max((b for b in breaks if b < match.start()), default=-1)
    end = min((b for b in breaks if b >= match.end()), default=len(sentence))
    clause = sentence[start + 1 : end]
    if any(w.lower() not in _ASKING_WORDS for w in _words(clause)):
        return sentence
    before = sentence[: max(start, 0)].rstrip(" ,;:—–(")
    after = sentence[end + 1 :].strip(" ,;:—–)")
    before, after = (part if _words(part) else "" for part in (before, after))
    ending = sentence[-1] if sentence[-1] in ".!…" else ""
    if before and after:
        return f"{before}, {after}"
    fact = before or after
    return fact + ending if fact and not fact.endswith((".", "!", "…")) else fact


def keywords(text: str, limit: int = 8) -> list[str]:
    """The words of text worth searching for: no stop words (English or Russian), no repeats."""
    out: list[str] = []
    for word in _words(text):
        low = word.lower().replace("ё", "е")
        if len(low) < 2 or low in STOPWORDS or low in _EXTRA_STOPWORDS or low in out:
            continue
        out.append(low)
    return out[:limit]


def _words(text: str) -> list[str]:
    return tokens(text)


def _stems(text: str) -> set[str]:
    return {s for token in _words(text) for s in analyze(token).stems}


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


def _read_notes(done: list[Exchange]) -> dict[str, str]:
    return {
        e.arg("path"): e.result for e in done if e.name == "memory_read" and not e.failed
    }


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
    return recall_report(notes_read, wanted), []


def recall_report(notes: dict[str, str], wanted: set[str]) -> str:
    """The matching lines of the notes read, as plain facts; exactly (no memory hits) when
    there are none."""
    facts: list[str] = []
    for text in notes.values():
        lines = [c for c in (_fact_line(line) for line in text.splitlines()) if c]
        matching = [line for line in lines if _stems(line) & wanted]
        # A note found by its name or through a link is on the subject even when no line
        # repeats the words: its first fact stands for it.
        facts += matching or lines[:1]
    unique = list(dict.fromkeys(facts))[:_MAX_FACTS]
    if not unique:
        return NO_MEMORY_HITS
    return "Already on disk:\n" + "\n".join(f"- {_clip(f, _FACT_LIMIT)}" for f in unique)


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
    return text if _words(text) else ""


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(":", 1)[-1].rsplit(".", 1)[0]


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def _title(fact: str) -> str:
    """A short title from the fact's first words."""
    text = fact.rstrip(" .!?…")
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
        if saves[-1].failed:
            return f"Not saved: {saves[-1].result.removeprefix('Error:').strip()}", []
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
    lines = reads[0].result.splitlines()
    facts = [f for f in (_fact_line(line) for line in lines) if f]
    gone = [f for f in facts if _stems(f) & wanted]
    # A best match with no line about it was found by its name: the whole note goes.
    whole = not gone or len(gone) == len(facts)
    if changes:
        if changes[-1].failed:
            return f"Not deleted: {changes[-1].result.removeprefix('Error:').strip()}", []
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
