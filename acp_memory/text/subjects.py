"""The facts a sentence states about a subject, in the shapes the offline model knows:
"my X is Y", "X is Y" and "we use Y for X". Two notes giving one subject two values contradict
each other; tidying's candidates and the offline model's recall and tidy read subjects here.

A subject and a value are compared as search words are (`analyze.py`: folded, stemmed, stop
words dropped), so "Deploy day is Friday." and "my deploy days are…" name one subject. Only a
short subject (up to four words) and a short value (up to eight) count: a longer sentence
describes rather than states, and calling it a value would find contradictions that are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from acp_memory.text.analyze import STOPWORDS, analyze, tokens

MAX_SUBJECT_WORDS = 4
MAX_VALUE_WORDS = 8

# Markdown that opens a line without being part of its sentence: bullets, numbers, headings,
# quotes, a task box.
_LEAD = re.compile(r"^(?:\s*(?:[-*+>]|\d+[.)]|#{1,6})\s+)*(?:\[[ xX]\]\s+)?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WE_USE = re.compile(r"^we\s+(?:now\s+)?use\s+(?P<value>.+?)\s+for\s+(?P<subject>.+?)$", re.I)
_MY = re.compile(r"^my\s+(?P<subject>(?:\S+\s+){0,3}?\S+)\s+is\s+(?P<value>.+)$", re.I)
_IS = re.compile(r"^(?P<subject>(?:\S+\s+){0,3}?\S+)\s+is\s+(?P<value>.+)$", re.I)
# A subject that is only a pointer names nothing by itself ("it is", "this is", "he is").
_POINTERS = frozenset("he she they there here one everything something nothing all each "
                      "who which whatever anything".split())
# A value that denies or adds says no value of its own ("is not…", "is also…").
_NOT_A_VALUE = frozenset("not no also still never".split())


@dataclass(frozen=True)
class Statement:
    """One sentence giving a subject a value."""

    subject: str  # the subject's search words: what two notes must share to contradict
    value: str  # the value's search words
    question: str  # the subject for people: "what `deploy day` is", "what we use for `builds`"
    sentence: str  # the sentence as written
    said: str  # the value as written: "Friday" of "Deploy day is Friday."


def statements(text: str) -> list[Statement]:
    """The statements of text, in order, at most one per sentence."""
    found: list[Statement] = []
    for line in text.splitlines():
        for sentence in _SENTENCE_END.split(_LEAD.sub("", line).strip()):
            statement = statement_of(sentence)
            if statement is not None:
                found.append(statement)
    return found


def statement_of(sentence: str) -> Statement | None:
    """The statement one sentence makes, or None when it has none of the shapes."""
    plain = sentence.strip().rstrip(".!;").strip()
    if " " not in plain:
        return None
    if m := _WE_USE.match(plain):
        subject, value = m["subject"], m["value"]
        question = f"what we use for `{_lowered(subject)}`"
    elif m := (_MY.match(plain) or _IS.match(plain)):
        subject, value = m["subject"], m["value"]
        question = f"what `{_lowered(subject)}` is"
    else:
        return None
    subject_key = search_words(subject)
    if m.re is _WE_USE and subject_key:
        subject_key = f"we use for {subject_key}"  # never the subject of an "is" sentence
    value_words = tokens(value)
    subject_words = tokens(subject.lower())
    if (not subject_key or len(subject_words) > MAX_SUBJECT_WORDS
            or not _POINTERS.isdisjoint(subject_words)):
        return None
    if (not value_words or len(value_words) > MAX_VALUE_WORDS
            or value_words[0].lower() in _NOT_A_VALUE):
        return None
    value_key = search_words(value)
    if not value_key:
        return None
    return Statement(subject_key, value_key, question, sentence.strip(), value.strip())


def _lowered(subject: str) -> str:
    # A sentence's capital goes; an identifier's (API_KEY, GitHub) stays.
    if len(subject) > 1 and subject[0].isupper() and subject[1].islower():
        return subject[0].lower() + subject[1:]
    return subject


def search_words(text: str) -> str:
    """The words of text as a search compares them: stems of the words that are not stop
    words, in order, space-separated."""
    out: list[str] = []
    for token in tokens(text):
        a = analyze(token)
        if a.whole in STOPWORDS:  # "my" among them
            continue
        out.extend(a.stems)
    return " ".join(out)
