"""Secret redaction: values that look like keys, tokens or passwords become `[REDACTED:<kind>]`.

Redaction runs on every note write, in a worker thread that a cancelled tool call cannot
abandon, so no input may make it slow: every pass over the text is linear in its length, and
bench/redaction.py times each pass on adversarial shapes beside plain prose. The files a
memory run writes (its log, its child's transcript, its record) go through it too.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MARK = "[REDACTED:{}]"


def _word(literal: str) -> str:
    r"""`\b` + literal, written so that the pattern begins with the literal.

    re finds a leading literal with a fast scan; a leading `\b` makes it try the whole pattern
    at every position of the text instead.
    """
    lit = re.escape(literal)
    return f"{lit}(?<!\\w{lit})"


# Provider and platform tokens with a recognisable shape, most specific first, each with the
# literals one of which it needs: a text holding none of them is not scanned at all. A group,
# where there is one, is the secret; the rest of the match is kept. Possessive quantifiers
# (`*+ ++ {n,}+`) give nothing back because nothing after them could use it.
_AWS_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA")
_GITLAB_PREFIXES = ("pat", "dt", "rt", "ptt", "cbt", "ft", "imt", "oas", "soat", "agent")
_SHAPES: list[tuple[str, tuple[str, ...], str]] = [
    ("private_key", ("-----BEGIN",),
     r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
     r"[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"),
    ("anthropic_key", ("sk-ant-",), _word("sk-ant-") + r"[A-Za-z0-9_-]{20,}+"),
    ("openai_key", ("sk-",), _word("sk-") + r"(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}+"),
    ("google_api_key", ("AIza",), _word("AIza") + r"[0-9A-Za-z_-]{35}"),
    ("gcp_oauth_secret", ("GOCSPX-",), _word("GOCSPX-") + r"[A-Za-z0-9_-]{20,}+"),
    ("gcp_access_token", ("ya29.",), _word("ya29.") + r"[0-9A-Za-z_-]{20,}+"),
    ("groq_key", ("gsk_",), _word("gsk_") + r"[A-Za-z0-9]{20,}+"),
    ("huggingface_token", ("hf_",), _word("hf_") + r"[A-Za-z0-9]{30,}+"),
    ("xai_key", ("xai-",), _word("xai-") + r"[A-Za-z0-9]{20,}+"),
    ("perplexity_key", ("pplx-",), _word("pplx-") + r"[A-Za-z0-9]{32,}+"),
    ("replicate_token", ("r8_",), _word("r8_") + r"[A-Za-z0-9]{30,}+"),
    ("aws_access_key", _AWS_PREFIXES,
     "(?:" + "|".join(_AWS_PREFIXES) + r")(?<!\w....)[A-Z0-9]{16}\b"),
    ("azure_key", ("AccountKey=",), r"AccountKey=([A-Za-z0-9+/]{40,}+={0,2})"),
    ("azure_key", ("SharedAccessKey=",), r"SharedAccessKey=([A-Za-z0-9+/]{30,}+={0,2})"),
    ("azure_key", ("sig=",), r"[?&]sig=([A-Za-z0-9%+/=]{20,}+)"),
    ("azure_client_secret", ("Q~",), r"\b[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"),
    ("github_token", tuple(f"gh{c}_" for c in "pousr"), _word("gh") + r"[pousr]_[A-Za-z0-9]{36,}+"),
    ("github_token", ("github_pat_",), _word("github_pat_") + r"[A-Za-z0-9_]{22,}+"),
    ("gitlab_token", tuple(f"gl{p}-" for p in _GITLAB_PREFIXES),
     _word("gl") + "(?:" + "|".join(_GITLAB_PREFIXES) + r")-[A-Za-z0-9_-]{20,}+"),
    ("slack_webhook", ("https://hooks.slack.com/",),
     r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]{20,}+"),
    ("slack_token", ("xox",), _word("xox") + r"[abposr]-[A-Za-z0-9-]{10,}+"),
    ("slack_token", ("xapp-",), _word("xapp-") + r"\d-[A-Za-z0-9-]{10,}+"),
    ("stripe_key", ("_live_", "_test_"), r"[sr]k(?<!\w[sr]k)_(?:live|test)_[A-Za-z0-9]{16,}+"),
    # A JWT may start after a '-' inside a longer run ("x-eyJ..."), but every start in one run
    # meets the same end of that run: only the first start is tried, or "eyJ-" repeated would
    # cost a scan to the end of the run per start.
    ("jwt", ("eyJ",),
     r"(?<![A-Za-z0-9_-])(?:(?!\beyJ)[A-Za-z0-9_]*+-)*+"
     r"(\beyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+)"),
    ("url_password", ("://",), r"://[^\s:/@]++:([^\s@/]++)(?=@)"),
]

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
    if any(ch in text for ch in _CASE_FIXES):
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


_PLACEHOLDER = re.compile(
    r"^(?:<[^>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%\(?[A-Za-z_]+\)?s?|\{\{.*\}\}|\*+|x{3,}|"
    r"\.{3}|none|null|nil|true|false|undefined|str|string|int|bytes|optional\[?.*|"
    r"required|redacted|changeme|your[_-].*|my[_-].*|example.*|placeholder|secret|password|"
    r"token|env|os\.environ.*|getenv.*|process\.env.*|\[redacted.*)$",
    re.IGNORECASE,
)


@dataclass
class Redaction:
    """The redacted text and what was removed, as {kind: count}."""

    text: str
    removed: Counter[str] = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return sum(self.removed.values())

    def summary(self) -> str:
        """One line for a tool result, or "" when nothing was removed."""
        if not self.removed:
            return ""
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(self.removed.items()))
        noun = "secret" if self.count == 1 else "secrets"
        return (f"Removed {self.count} {noun} before writing ({kinds}); "
                "each is now [REDACTED:<kind>].")


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    chars = set(value)
    # str.count is much faster than a Counter, and with few distinct characters (a key's
    # alphabet) counting each of them stays linear.
    counts = map(value.count, chars) if len(chars) <= 96 else Counter(value).values()
    return -sum(c / n * math.log2(c / n) for c in counts)


_CODE_OR_PATH = re.compile(
    r"^(?:[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+|.*\(.*|"  # attribute or call
    r"(?:~|\.{1,2})?/[A-Za-z0-9_./-]*|[A-Za-z]+://.*|.*\.(?:pem|key|crt|json|ya?ml|txt|env|p12))$"
)


# A run of 16+ identifier characters mixing lower case, upper case and digits: generated, not
# written by hand, so "abc.XyZ..." built of such runs is a token even though it has a dot.
# Only tried from the start of a run: any later start in it sees a subset of the same characters.
_RANDOM_RUN = re.compile(
    r"(?<![A-Za-z0-9_-])(?=[A-Z0-9_-]*+[a-z])(?=[a-z0-9_-]*+[A-Z])(?=[A-Za-z_-]*+[0-9])"
    r"[A-Za-z0-9_-]{16}"
)


_ATTRIBUTE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+")
_PATH = re.compile(r"(?:~|\.{1,2})?/[A-Za-z0-9_./-]*")
_URL = re.compile(r"[A-Za-z]+://")
_FILE_SUFFIXES = (".pem", ".key", ".crt", ".json", ".yaml", ".yml", ".txt", ".env", ".p12")


def _code_or_path(value: str) -> bool:
    """_CODE_OR_PATH.match(value), without its `.*` scans over a long value."""
    # One regex is quicker on a short value; a newline (never in a value redaction looks at)
    # is where `.` and `$` would differ from the checks below.
    if len(value) <= 256 or "\n" in value:
        return bool(_CODE_OR_PATH.match(value))
    return bool(
        _ATTRIBUTE.fullmatch(value) or "(" in value or _PATH.fullmatch(value)
        or _URL.match(value) or value.endswith(_FILE_SUFFIXES)
    )


def _not_a_value(value: str) -> bool:
    # Placeholders, code and file paths sit after secret-sounding names all the time.
    if _PLACEHOLDER.match(value):
        return True
    return _code_or_path(value) and not _RANDOM_RUN.search(value)


def looks_random(value: str) -> bool:
    """A value long and varied enough to be a generated key rather than a word or a number."""
    if len(value) < 16 or _not_a_value(value):
        return False
    if not re.search(r"[0-9]", value) or not re.search(r"[A-Za-z]", value):
        return False  # real keys mix letters and digits; words and numbers do not
    return entropy(value) >= 3.0


def _plausible_password(value: str) -> bool:
    # A value that runs on ("str | None = None") is judged by its first word as well.
    first = value.split(maxsplit=1)[0] if value.strip() else value
    return (len(value) >= 3 and not _not_a_value(value)
            and (first == value or not _not_a_value(first)))


def _plausible_token(value: str) -> bool:
    # Letters and digits together (looks_random asks that too, and more).
    if len(value) < 8 or _not_a_value(value):
        return False
    return bool(re.search(r"[0-9]", value)) and bool(re.search(r"[A-Za-z]", value))


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


@dataclass(frozen=True)
class _Shape:
    """Tokens of one recognisable shape."""

    kind: str
    markers: tuple[str, ...]
    pattern: re.Pattern[str]

    def apply(self, text: str, removed: Counter[str]) -> str:
        if not any(marker in text for marker in self.markers):
            return text

        def replace(m: re.Match[str]) -> str:
            removed[self.kind] += 1
            if not m.re.groups:
                return MARK.format(self.kind)
            # Keep the user name of user:password@host, the run before a JWT, "AccountKey=".
            whole, start = m.group(0), m.start()
            return whole[: m.start(1) - start] + MARK.format(self.kind) + whole[m.end(1) - start :]

        return self.pattern.sub(replace, text)


PASSES: list[_Shape | _Rule] = [
    *(_Shape(kind, markers, re.compile(p)) for kind, markers, p in _SHAPES),
    _Rule("password", _PASSWORD_NAMES, _LINE_ASSIGNMENT, _plausible_password),
    _Rule("token", _TOKEN_NAMES, _WORD_ASSIGNMENT, _plausible_token),
    _Rule("secret", _SECRETISH_NAMES, _WORD_ASSIGNMENT, looks_random),
]
"""Every pass of `redact`, in order: `kind`, and `apply(text, removed)` returning the text."""


def redact(text: str) -> Redaction:
    """Replace every secret-looking value in text; the result lists the kinds removed."""
    removed: Counter[str] = Counter()
    for step in PASSES:
        text = step.apply(text, removed)
    return Redaction(text, removed)


def redact_text(text: str) -> str:
    """text with every secret-looking value replaced (what was removed is not kept)."""
    return redact(text).text if text else text


def redact_json(value: Any) -> Any:
    """A JSON value with each of its strings redacted (keys are kept). A string that holds a
    JSON document (a tool call's arguments) is redacted inside, so that it stays one."""
    if isinstance(value, str):
        if value[:1] in ("{", "["):
            try:
                inner = json.loads(value)
            except ValueError:
                return redact_text(value)
            cleaned = redact_json(inner)
            return value if cleaned == inner else json.dumps(cleaned, ensure_ascii=False)
        return redact_text(value)
    if isinstance(value, dict):
        return {key: redact_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_json(item) for item in value]
    return value


class RedactedStream:
    """Text that arrives in pieces (a model's stream), redacted as it comes. Each piece is
    held back to the end of its line, and a private key to its END line, so that a secret
    split across two pieces is still whole when it is redacted."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, text: str) -> str:
        """The redacted text that may be written now (possibly "")."""
        held = self._held + text
        cut = held.rfind("\n") + 1
        begin = held.rfind("-----BEGIN", 0, cut)
        if begin >= 0 and "-----END" not in held[begin:]:
            cut = held.rfind("\n", 0, begin) + 1  # the key's lines wait for its end
        ready, self._held = held[:cut], held[cut:]
        return redact_text(ready)

    def flush(self) -> str:
        """What is still held, redacted: the stream ended."""
        rest, self._held = self._held, ""
        return redact_text(rest)

    def text(self, whole: str) -> str:
        """A text that came whole, redacted (before it is cut for a log line)."""
        return redact_text(whole)
