"""Secrets known by their name: `password = …`, `token: …`, `api_key=…` and the like.

The value after a separator is matched forwards; the name before it is read backwards, in the
reversed text, so every pass stays linear in the length of the text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from acp_memory.memory.secrets.values import (
    MARK,
    looks_random,
    plausible_password,
    plausible_token,
)

# Names whose value is a credential whatever it looks like (if it is not a placeholder). A name
# counts wherever it ends a run of name characters (DB_PASSWORD, apiToken, мойпароль), so only
# the endings are listed: API_KEY is found as KEY. Lower case: see _folded.
_PASSWORD_NAMES = ("password", "passwd", "passphrase", "pass", "pwd", "пароль", "пароля")
_TOKEN_NAMES = ("tokens", "token", "токен")
# Names that only count with a value that looks random (the entropy rule).
_SECRETISH_NAMES = (
    "secret", "credentials", "credential", "authorization", "auth", "key", "секрет", "ключ"
)
# Only short suffixes after the secret word: DB_PASSWORD_2 is a secret, password_policy is not.
_NAME_TAILS = ("value", "plain", "raw", "b64", "base64", "hex")
# "password for the staging db: ...", "пароль от почты: ..."
_FOR_WORDS = ("for", "to", "of", "at", "on", "от", "для", "к", "на")

# An assignment is `name ["']? \s* sep value`, or `name for <1-3 words>: value`. The value is
# matched forwards from the separator; the name is found by reading backwards from it, in the
# reversed text, so the work is per '=' or ':' rather than per character of the text.
_SEP = re.compile(r"[=:]")
# A quoted value is taken whole, spaces included; an unquoted one is a word or, for a
# password (which may hold spaces), the rest of the line.
_QUOTED = r"(?P<q>[\"'`])(?P<qvalue>(?!\[REDACTED:)[^\r\n]*?)(?P=q)"
_SCHEME = r"(?:Bearer|Basic|Token)"
_WORD_VALUE = r"[^\s\"'`,;)}\]]++"
_LINE_VALUE = r"[^\r\n]*[^\s\"'`,;]"
# A word never begins with a space: spaces given back to it could never help.
_WORD_ASSIGNMENT = (
    rf"(?:=|:|=>|:=)\s*+(?:{_QUOTED}|(?:{_SCHEME}\s++)?(?P<value>(?!\[REDACTED:){_WORD_VALUE}))"
)
# A value running to the end of the line may begin with a space. With plain `\s*` and `\s+`
# before it, re would give those spaces back one at a time and rescan the rest of the line
# each time; only the last space can ever help (when "[REDACTED:" follows it and the value
# must not begin with that), so the spaces are taken whole and that one case is written out.
_GIVE_BACK_ONE = r"(?:\s(?=\s))*+(?=[^\S\r\n]\[REDACTED:)"
_LINE_ASSIGNMENT = (
    r"(?:=|:|=>|:=)(?:\s*+(?:" + _QUOTED
    + rf"|{_SCHEME}\s++(?P<value>(?!\[REDACTED:){_LINE_VALUE})"
    + rf"|{_SCHEME}\s{_GIVE_BACK_ONE}(?P<value_b>{_LINE_VALUE})"
    + rf"|(?P<value_c>(?!\[REDACTED:){_LINE_VALUE}))"
    + rf"|{_GIVE_BACK_ONE}(?P<value_d>{_LINE_VALUE}))"
)
# How much text one backwards scan covers: when a value runs on past it, the rest of the scan
# was wasted work, so it is kept short. A window ends just after a separator, and no name
# reaches back over one.
_WINDOW = 8192

# Names are matched in lower case, which is much faster for re than IGNORECASE. These are the
# characters that IGNORECASE takes for a letter of a name but str.lower() does not turn into it
# (İ would even become two characters); tests/memory/test_redact.py checks the list is whole.
_CASE_FIXES = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u1c81": "д", "\u1c82": "о",
               "\u1c83": "с", "\u1c84": "т", "\u1c85": "т"}
_CASE_FIX_TABLE = str.maketrans(_CASE_FIXES)


def _folded(text: str) -> str:
    """text in lower case, one character for one, as IGNORECASE compares the names' letters."""
    if not text.isascii() and any(ch in text for ch in _CASE_FIXES):  # isascii is O(1)
        text = text.translate(_CASE_FIX_TABLE)
    return text.lower()


def _alternatives(words: tuple[str, ...]) -> str:
    return "|".join(re.escape(w[::-1]) for w in sorted(words, key=len, reverse=True))


def _name_before(names: tuple[str, ...]) -> re.Pattern[str]:
    """In the reversed, folded text: a separator and the name before it, read backwards."""
    endings = "".join(sorted({w[-1] for w in names + _NAME_TAILS}))
    name = (
        # The last letter of a name, checked first: most separators follow none.
        f"(?=[{re.escape(endings)}0-9])"
        f"(?:(?:{_alternatives(_NAME_TAILS)}|[0-9]++)[_-]?)?(?:{_alternatives(names)})"
    )
    word = r"[\w.@-]++\s++"
    clause = "(?:" + _alternatives(_FOR_WORDS) + r")\s++" + name
    # The name right before the separator is tried first, then a "for" clause of one, two and
    # three words: a match names the last possible start of a name.
    return re.compile(
        r"[=:](?=[\s\"'\w.@-])"
        rf"(?:\s*+[\"']?{name}|(?<=:)\s*+{word}(?:{clause}|{word}(?:{clause}|{word}{clause})))"
    )


@dataclass(frozen=True)
class _Rule:
    """Named assignments of one kind: `name: value` where the value is plausible for the kind."""

    kind: str
    names: tuple[str, ...]
    assignment: str
    plausible: Callable[[str], bool]
    before: re.Pattern[str] = field(init=False, repr=False)
    value: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "before", _name_before(self.names))
        object.__setattr__(self, "value",
                           re.compile(self.assignment, re.IGNORECASE))

    def apply(self, text: str, removed: Counter[str]) -> str:
        folded = _folded(text)
        if not any(name in folded for name in self.names):
            return text
        n = len(text)
        rev = folded[::-1]
        match_value, plausible, mark = self.value.match, self.plausible, MARK.format(self.kind)
        out: list[str] = []
        copied = 0  # text[:copied] is in out
        pos = 0  # where the next match may start: a value once matched is never looked into
        count = 0
        start = 0
        while start < n:
            cut = _SEP.search(text, start + _WINDOW)
            end = cut.end() if cut else n
            found = [(n - 1 - m.start(), n - m.end())
                     for m in self.before.finditer(rev, n - end, n - start)]
            for sep, name_start in reversed(found):  # left to right
                if name_start < pos:
                    continue
                m = match_value(text, sep)
                if m is None:
                    continue
                pos = m.end()
                value_start, value_end = m.span(m.lastindex or 0)  # the value closes last
                if plausible(text[value_start:value_end]):
                    out.append(text[copied:value_start])
                    out.append(mark)
                    copied = value_end
                    count += 1
            start = max(end, pos)
        if count:
            removed[self.kind] += count
        out.append(text[copied:])
        return "".join(out)


NAME_PASSES = [
    _Rule("password", _PASSWORD_NAMES, _LINE_ASSIGNMENT, plausible_password),
    _Rule("token", _TOKEN_NAMES, _WORD_ASSIGNMENT, plausible_token),
    _Rule("secret", _SECRETISH_NAMES, _WORD_ASSIGNMENT, looks_random),
]
"""The passes of `redact` by name, after the shapes: passwords, tokens, random-looking secrets."""


def _fewest(words: tuple[str, ...]) -> tuple[str, ...]:
    """words without those that hold another of them: a text holds one of the result exactly
    when it holds one of words (PASSWORD holds PASS), in fewer scans."""
    kept: list[str] = []
    for word in sorted(set(words), key=len):
        if not any(shorter in word for shorter in kept):
            kept.append(word)
    return tuple(kept)


_ANY_NAME = _fewest(tuple(name for rule in NAME_PASSES for name in rule.names))


def could_change(text: str) -> bool:
    """Whether some pass of NAME_PASSES could change text; False means none of them does.

    A rule changes nothing unless one of its names is in the folded text (its own first check)
    and its `before` matches there, which needs a '=' or ':' (folding makes neither): one fold
    and one scan per name serve every rule."""
    if "=" not in text and ":" not in text:
        return False
    folded = _folded(text)
    for name in _ANY_NAME:  # a loop: quicker than any() over a generator
        if name in folded:
            return True
    return False
