"""The phrases that ask the memory child to keep or forget something, or not to look at all.

A trigger ("remember", "forget", their Russian forms) keeps the sentence that carries it, the
trigger phrase removed; a sentence evidently meant to last ("… for future sessions") is kept too,
with the message's other sentences when it points back ("add a line saying that this fact
should be remembered"), so that what "this" names is kept as well.
The project root is meant when the message names the project, workspace or repository.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from acp_memory.text.analyze import tokens

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
_MEMORY_WORDS = re.compile(r"\b(?:memory|memories|notes?)\b|памят|заметк", re.IGNORECASE)
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
# A sentence that points back ("… that this fact should be remembered", "keep it in mind")
# names its fact elsewhere in the message: the words just before the intent, or in it.
_POINTS_BACK = re.compile(
    r"(?:\b(?:this|that|these|those|it)(?:\s+(?:fact|facts|one|rule|detail|details|info"
    r"|information|line|sentence|answer|codeword))?|(?<!\w)(?:это|этот|эта|эту|эти|то)"
    r"(?:\s+\w+)?)\s*$",
    re.IGNORECASE,
)
_POINTER = re.compile(r"\b(?:this|that|these|those|it)\b|(?<!\w)(?:это|то)(?!\w)", re.IGNORECASE)
# How much of the message a note that points back keeps: well within memory.max_note_bytes
# (16 KiB by default), redaction markers included.
_CONTEXT_BYTES = 4096
_RULE = re.compile(r"\bfrom\s+now\s+on\b|\bgoing\s+forward\b|\bвпредь\b|\bотныне\b", re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"[,;:—–()]")
# The words a clause that only asks for remembering is made of.
_ASKING_WORDS = frozenset(
    """a all be fact facts for future in info information it keep kept know later memory
    mind please remember remembered session sessions should that the these this
    будущее будущих для запомнить знать на надо нужно помнить пожалуйста сессии сессий
    следует сохранить это этот эта""".split()
)


# A statement of how the work goes, which a reflection keeps: "we use …", "we decided …",
# "from now on …".
_STANDING = re.compile(
    r"\bwe(?:['’]ve|\s+have)?\s+(?:use|decided|agreed)\b|\bfrom\s+now\s+on\b", re.IGNORECASE
)
_WE = re.compile(r"\bwe\b|\bour\b", re.IGNORECASE)


@dataclass(frozen=True)
class Intent:
    """A persist request: keep or forget `fact`, in `scope`."""

    action: str  # "save" or "forget"
    fact: str
    scope: str  # global or project; "both" when forgetting without naming the project


def asks_not_to_consult(task: str) -> bool:
    """Whether the message asks that memory not be consulted for it."""
    return _SKIP.search(task) is not None


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
        if not tokens(fact) and i + 1 < len(sentences):
            fact = sentences[i + 1]  # "Remember this:" with the fact on the next line
        if not tokens(fact):
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
        if fact == sentence and _points_back(sentence, match):
            return _with_context(sentences, i)
        if not tokens(fact):
            # "This should be remembered for future sessions." after (or before) the fact.
            near = [s for s in (sentences[i - 1 : i] + sentences[i + 1 : i + 2]) if tokens(s)]
            fact = next((s for s in near if not s.endswith("?")), "")
        if tokens(fact):
            return fact  # verbatim: a codeword and the words around it as the user wrote them
    return None


def _points_back(sentence: str, match: re.Match[str]) -> bool:
    """Whether the intent names what should last by a pointer ("this fact", "it")."""
    return bool(_POINTS_BACK.search(sentence[: match.start()]) or _POINTER.search(match[0]))


def _with_context(sentences: list[str], i: int) -> str:
    """Sentence i with the message's other sentences, in order, one a line: the nearest first
    while they fit in _CONTEXT_BYTES (the task text is redacted already)."""
    kept = {i}
    size = len(sentences[i].encode())
    for j in sorted(range(len(sentences)), key=lambda j: abs(j - i))[1:]:
        cost = len(sentences[j].encode()) + 1
        if size + cost > _CONTEXT_BYTES:
            break
        kept.add(j)
        size += cost
    return "\n".join(sentences[j] for j in sorted(kept))


def _without_asking_clause(sentence: str, match: re.Match[str]) -> str:
    """The sentence without the clause around `match` when that clause only asks for
    remembering; the whole sentence otherwise."""
    breaks = [m.start() for m in _CLAUSE_BREAK.finditer(sentence)]
    start = max((b for b in breaks if b < match.start()), default=-1)
    end = min((b for b in breaks if b >= match.end()), default=len(sentence))
    clause = sentence[start + 1 : end]
    if any(w.lower() not in _ASKING_WORDS for w in tokens(clause)):
        return sentence
    before = sentence[: max(start, 0)].rstrip(" ,;:—–(")
    after = sentence[end + 1 :].strip(" ,;:—–)")
    before, after = (part if tokens(part) else "" for part in (before, after))
    ending = sentence[-1] if sentence[-1] in ".!…" else ""
    if before and after:
        return f"{before}, {after}"
    fact = before or after
    return fact + ending if fact and not fact.endswith((".", "!", "…")) else fact


def lasting_statements(message: str) -> list[Intent]:
    """What a reflection keeps of one user message: the fact a persist request or an evident
    intent to last names (`persist_intent`, saves only), then each "we use … / we decided …
    / from now on …" sentence; a question is never one. A sentence about "we" or the project
    goes to the project root."""
    out: list[Intent] = []
    intent = persist_intent(message)
    if intent is not None and intent.action == "save":
        out.append(intent)
    for sentence in (s.strip() for s in _SENTENCE.split(message)):
        if sentence.endswith("?") or not _STANDING.search(sentence):
            continue
        if any(sentence in kept.fact for kept in out):
            continue
        ours = _WE.search(sentence) or _PROJECT.search(sentence)
        out.append(Intent("save", sentence, "project" if ours else "global"))
    return out
