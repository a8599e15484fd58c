"""Text to search terms: words of any script, identifiers whole and by parts, en/ru stems."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

# A word, optionally joined to more words by '-' (MEMFRUIT-1A2B, well-known).
_TOKEN = re.compile(r"\w+(?:-\w+)*")
# camelCase humps; letters and digits stay together (1A2B, sha256) so no part is a lone letter.
_CAMEL = re.compile(r"[A-Z0-9]+(?=[A-Z][a-z])|[A-Z0-9]+(?![a-z])|[A-Z]?[a-z0-9]+|[^\W_]+")
_CYRILLIC = re.compile(r"[а-яё]")
_LATIN = re.compile(r"^[a-z]+$")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")

_EN = snowballstemmer.stemmer("english")
_RU = snowballstemmer.stemmer("russian")

STOPWORDS = frozenset(
    """a an and are as at be but by do does for from has have how i if in into is it its me my
    of on or our so than that the their then there these this to was we were what when where
    which who why will with you your
    а без бы в во вот все да для до его ее если же за и из или им их к как ко когда ли мне мы
    на над не нет но о об от по под при про с со так то тот у уже чем что чтобы это я""".split()
)


@dataclass(frozen=True)
class Analysis:
    """A token's search terms: `whole` is the exact form, `stems` the parts reduced to stems."""

    whole: str
    stems: tuple[str, ...]
    identifier: bool


def _fold(word: str) -> str:
    return word.lower().replace("ё", "е").replace("-", "_")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """The stem of one lowercase word: Russian or English snowball, other scripts unchanged."""
    if _LATIN.match(word):
        return str(_EN.stemWord(word))
    if _CYRILLIC.search(word):
        return str(_RU.stemWord(word))
    return word


def _parts(token: str) -> list[str]:
    parts: list[str] = []
    for chunk in re.split(r"[_-]+", token):
        if not chunk:
            continue
        if _CJK.search(chunk):
            parts.extend(_cjk_grams(chunk))
        else:
            parts.extend(_CAMEL.findall(chunk) or [chunk])
    return parts


def _cjk_grams(chunk: str) -> list[str]:
    # CJK has no spaces: overlapping character pairs stand in for words.
    if len(chunk) < 2:
        return [chunk]
    return [chunk[i : i + 2] for i in range(len(chunk) - 1)]


@lru_cache(maxsize=200_000)
def analyze(token: str) -> Analysis:
    """Terms of one raw token; identifiers (snake_case, CamelCase, ...) keep their whole form."""
    parts = _parts(token)
    identifier = len(parts) > 1 and not _CJK.search(token)
    stems = tuple(dict.fromkeys(stem(_fold(p)) for p in parts if p))
    return Analysis(_fold(token), stems, identifier)


def tokens(text: str) -> list[str]:
    """Raw word and identifier tokens of a text, in order."""
    return _TOKEN.findall(text)


def document_terms(text: str) -> tuple[str, str]:
    """The `exact` and `stems` columns for the index, term frequency kept by repetition.

    `exact` is the text folded as `analyze` folds a token (case, ё, a hyphen inside a word),
    left for SQLite's tokenizer to split: the same words, without a Python loop over them.
    """
    exact = text.lower().replace("ё", "е")
    if "-" in exact:
        exact = _INNER_HYPHEN.sub("_", exact)
    if len(_STEMS_TEXT) > _STEMS_TEXT_MAX:
        _STEMS_TEXT.clear()
    return exact, " ".join(map(_STEMS_TEXT.__getitem__, _TOKEN.findall(text)))


class _StemsText(dict[str, str]):
    """A token's stems as the index stores them, analysed the first time it is looked up: a
    dict's own lookup in one `map` is what makes a 40 MB build fast."""

    def __missing__(self, word: str) -> str:
        found = self[word] = " ".join(analyze(word).stems)
        return found


_INNER_HYPHEN = re.compile(r"\b-\b")  # a hyphen with a word character on each side
_STEMS_TEXT = _StemsText()
_STEMS_TEXT_MAX = 200_000


@dataclass(frozen=True)
class Query:
    """A query as term groups (one per word: its exact form or any of its stems) + identifiers."""

    groups: list[list[str]]
    identifiers: list[str]

    @property
    def terms(self) -> list[str]:
        return _unique(t for group in self.groups for t in group)


def parse_query(text: str) -> Query:
    """Analyse a query; stopwords are dropped unless nothing else is left."""
    analyses = [analyze(t) for t in tokens(text)]
    kept = [a for a in analyses if a.whole not in STOPWORDS] or analyses
    groups: dict[str, list[str]] = {}
    for a in kept:
        groups.setdefault(a.whole, _unique([a.whole, *a.stems]))
    return Query(list(groups.values()), _unique(a.whole for a in kept if a.identifier))


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
