"""Secrets known by their shape: provider and platform tokens, private keys, URL passwords."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from acp_memory.memory.secrets.values import MARK


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
    # A key pair: the 40-character secret that follows its key id on the same line, however
    # it is introduced ("with secret …", "/", a table cell), never a hex digest such as a
    # commit id; the id goes in the next pass.
    ("aws_secret_key", _AWS_PREFIXES,
     "(?:" + "|".join(_AWS_PREFIXES) + r")(?<!\w....)[A-Z0-9]{16}\b[^\n]{0,80}?"
     r"(?<![A-Za-z0-9/+])(?![0-9a-f]{40})([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
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


SHAPE_PASSES = [_Shape(kind, markers, re.compile(p)) for kind, markers, p in _SHAPES]
"""One pass of `redact` per shape, most specific first."""

_ANY_MARKER = tuple(dict.fromkeys(marker for shape in SHAPE_PASSES for marker in shape.markers))


def could_change(text: str) -> bool:
    """Whether some pass of SHAPE_PASSES could change text; False means none of them does (a
    shape changes no text that holds none of its markers)."""
    # Plain `in` scans: a regex alternation of these literals saves half a microsecond on an id
    # but is slower from some 100 characters on, where re tries it at every letter that starts
    # a marker.
    for marker in _ANY_MARKER:  # a loop: quicker than any() over a generator
        if marker in text:
            return True
    return False
