"""Secret redaction: values that look like keys, tokens or passwords become `[REDACTED:<kind>]`."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

MARK = "[REDACTED:{}]"

# Provider and platform tokens with a recognisable shape, most specific first.
_SHAPES: list[tuple[str, str]] = [
    ("private_key", r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
                    r"[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("gcp_oauth_secret", r"\bGOCSPX-[A-Za-z0-9_-]{20,}"),
    ("gcp_access_token", r"\bya29\.[0-9A-Za-z_-]{20,}"),
    ("groq_key", r"\bgsk_[A-Za-z0-9]{20,}"),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("xai_key", r"\bxai-[A-Za-z0-9]{20,}"),
    ("perplexity_key", r"\bpplx-[A-Za-z0-9]{32,}"),
    ("replicate_token", r"\br8_[A-Za-z0-9]{30,}"),
    ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z0-9]{16}\b"),
    ("azure_key", r"(?<=AccountKey=)[A-Za-z0-9+/]{40,}={0,2}"),
    ("azure_key", r"(?<=SharedAccessKey=)[A-Za-z0-9+/]{30,}={0,2}"),
    ("azure_key", r"(?<=[?&]sig=)[A-Za-z0-9%+/=]{20,}"),
    ("azure_client_secret", r"\b[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"),
    ("github_token", r"\bgh[pousr]_[A-Za-z0-9]{36,}"),
    ("github_token", r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    ("gitlab_token", r"\bgl(?:pat|dt|rt|ptt|cbt|ft|imt|oas|soat|agent)-[A-Za-z0-9_-]{20,}"),
    ("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]{20,}"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("slack_token", r"\bxapp-\d-[A-Za-z0-9-]{10,}"),
    ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("url_password", r"(?<=://)(?:[^\s:/@]+):([^\s@/]+)(?=@)"),
]

# Names whose value is a credential whatever it looks like (if it is not a placeholder).
_PASSWORD_NAMES = r"pass(?:word|wd|phrase)?|pwd|пароль|парол[ья]"
_TOKEN_NAMES = (
    r"(?:api|access|auth|bearer|refresh|session|id|secret|private|client|bot|app|"
    r"personal|deploy|service)?[_-]?tokens?|токен"
)
# Names that only count with a value that looks random (the entropy rule).
_SECRETISH_NAMES = (
    r"secret|api[_-]?key|apikey|access[_-]?key|private[_-]?key|secret[_-]?key|client[_-]?secret|"
    r"credentials?|auth|authorization|signing[_-]?key|encryption[_-]?key|master[_-]?key|"
    r"license[_-]?key|key|секрет|ключ"
)

# Only short suffixes after the secret word: DB_PASSWORD_2 is a secret, password_policy is not.
_NAME_TAIL = r"(?:[_-]?(?:value|plain|raw|b64|base64|hex|[0-9]+))?"
_ASSIGN = (
    r"(?P<name>(?<![A-Za-z0-9])[A-Za-z0-9_.-]*?(?:{names}){tail}"
    # "password for the staging db: ...", "пароль от почты: ..."
    r"(?:\s+(?:for|to|of|at|on|от|для|к|на)(?:\s+[\w.@-]+){1,3}(?=\s*:))?)"
    r"(?P<sep>[\"']?\s*(?:=|:|=>|:=)\s*)"
    # A quoted value is taken whole, spaces included; an unquoted one up to {stop}.
    r"(?:(?P<q>[\"'`])(?P<qvalue>(?!\[REDACTED:)[^\r\n]*?)(?P=q)"
    r"|(?P<scheme>(?:Bearer|Basic|Token)\s+)?(?P<value>(?!\[REDACTED:){stop}))"
)
# Tokens and keys never hold spaces; a password may, so unquoted it runs to the end of line.
_WORD_VALUE = r"[^\s\"'`,;)}\]]+"
_LINE_VALUE = r"[^\r\n]*[^\s\"'`,;]"
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
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


_CODE_OR_PATH = re.compile(
    r"^(?:[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+|.*\(.*|"  # attribute or call
    r"(?:~|\.{1,2})?/[A-Za-z0-9_./-]*|[A-Za-z]+://.*|.*\.(?:pem|key|crt|json|ya?ml|txt|env|p12))$"
)


# A run of 16+ identifier characters mixing lower case, upper case and digits: generated, not
# written by hand, so "abc.XyZ..." built of such runs is a token even though it has a dot.
_RANDOM_RUN = re.compile(
    r"(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{16,}"
)


def _not_a_value(value: str) -> bool:
    # Placeholders, code and file paths sit after secret-sounding names all the time.
    if _PLACEHOLDER.match(value):
        return True
    return bool(_CODE_OR_PATH.match(value)) and not _RANDOM_RUN.search(value)


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
    return len(value) >= 3 and not _not_a_value(value) and not _not_a_value(first)


def _plausible_token(value: str) -> bool:
    if len(value) < 8 or _not_a_value(value):
        return False
    return looks_random(value) or (
        bool(re.search(r"[0-9]", value)) and bool(re.search(r"[A-Za-z]", value))
    )


def _assign(names: str, stop: str = _WORD_VALUE) -> re.Pattern[str]:
    pattern = _ASSIGN.replace("{names}", names).replace("{tail}", _NAME_TAIL)
    return re.compile(pattern.replace("{stop}", stop), re.IGNORECASE)


_RULES: list[tuple[str, re.Pattern[str], Callable[[str], bool]]] = [
    ("password", _assign(_PASSWORD_NAMES, _LINE_VALUE), _plausible_password),
    ("token", _assign(_TOKEN_NAMES), _plausible_token),
    ("secret", _assign(_SECRETISH_NAMES), looks_random),
]
_COMPILED_SHAPES = [(kind, re.compile(p)) for kind, p in _SHAPES]


def redact(text: str) -> Redaction:
    """Replace every secret-looking value in text; the result lists the kinds removed."""
    removed: Counter[str] = Counter()

    for kind, pattern in _COMPILED_SHAPES:
        def shape(m: re.Match[str], kind: str = kind) -> str:
            removed[kind] += 1
            if m.re.groups:  # keep the user name of user:password@host
                start = m.start(1)
                return m.group(0)[: start - m.start()] + MARK.format(kind)
            return MARK.format(kind)

        text = pattern.sub(shape, text)

    for kind, pattern, plausible in _RULES:
        def assign(m: re.Match[str], kind: str = kind, plausible: Callable[[str], bool] = plausible
                   ) -> str:
            quote = m.group("q") or ""
            value = m.group("qvalue") if quote else m.group("value")
            if not plausible(value):
                return m.group(0)
            removed[kind] += 1
            kept = m.group("name") + m.group("sep") + quote + (m.group("scheme") or "")
            return kept + MARK.format(kind) + quote

        text = pattern.sub(assign, text)
    return Redaction(text, removed)
