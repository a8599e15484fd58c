"""Whether a value is a credential: not a placeholder, code or a path, and varied enough; and
the mark a removed one becomes."""

from __future__ import annotations

import math
import re
from collections import Counter

MARK = "[REDACTED:{}]"  # what a removed value becomes; no pass looks into one again

_PLACEHOLDER = re.compile(
    r"^(?:<[^>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%\(?[A-Za-z_]+\)?s?|\{\{.*\}\}|\*+|x{3,}|"
    r"\.{3}|none|null|nil|true|false|undefined|str|string|int|bytes|optional\[?.*|"
    r"required|redacted|changeme|your[_-].*|my[_-].*|example.*|placeholder|secret|password|"
    r"token|env|os\.environ.*|getenv.*|process\.env.*|\[redacted.*)$",
    re.IGNORECASE,
)


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


def plausible_password(value: str) -> bool:
    """A value after a password's name that can be the password itself."""
    # A value that runs on ("str | None = None") is judged by its first word as well.
    first = value.split(maxsplit=1)[0] if value.strip() else value
    return (len(value) >= 3 and not _not_a_value(value)
            and (first == value or not _not_a_value(first)))


def plausible_token(value: str) -> bool:
    """A value after a token's name that can be the token itself."""
    # Letters and digits together (looks_random asks that too, and more).
    if len(value) < 8 or _not_a_value(value):
        return False
    return bool(re.search(r"[0-9]", value)) and bool(re.search(r"[A-Za-z]", value))

