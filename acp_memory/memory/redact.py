"""Secret redaction: values that look like keys, tokens or passwords become `[REDACTED:<kind>]`.

Redaction runs on every note write, in a worker thread that a cancelled tool call cannot
abandon, so no input may make it slow: every pass over the text is linear in its length, and
bench/redaction.py times each pass on adversarial shapes beside plain prose. The files a
memory run writes (its log, its child's transcript, its record) go through it too.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from acp_memory.memory.secrets import names, shapes
from acp_memory.memory.secrets.names import NAME_PASSES
from acp_memory.memory.secrets.shapes import SHAPE_PASSES


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


class Pass(Protocol):
    """One pass of `redact`: the secrets of one kind."""

    @property
    def kind(self) -> str: ...

    def apply(self, text: str, removed: Counter[str]) -> str:
        """text with this pass's secrets replaced; each one counted in removed[kind]."""
        ...


PASSES: list[Pass] = [*SHAPE_PASSES, *NAME_PASSES]
"""Every pass of `redact`, in order: recognisable shapes first, then values by their name (what
`_passes` runs, group by group)."""

SHORTEST_CHANGED = 6
"""No pass changes a text shorter than this ("://a:b@" and "pwd=abc" are the shortest it can):
ids, roles and the like are never scanned. tests/memory/test_redact.py derives the bound from
the patterns of every pass."""


def _passes(text: str, removed: Counter[str]) -> str:
    """PASSES applied in turn, skipping those that provably change nothing.

    Most texts (ids, timestamps, prose) hold nothing any pass looks for: one combined check per
    group returns them at once instead of some thirty passes each checking on its own. A group
    that changes nothing hands on the text it got, so the result is that of every pass."""
    if len(text) < SHORTEST_CHANGED:
        return text
    if shapes.could_change(text):
        for shape in SHAPE_PASSES:
            text = shape.apply(text, removed)
    if names.could_change(text):  # the text the shapes left: a mark may hold a name
        for rule in NAME_PASSES:
            text = rule.apply(text, removed)
    return text


def redact(text: str) -> Redaction:
    """Replace every secret-looking value in text; the result lists the kinds removed."""
    removed: Counter[str] = Counter()
    return Redaction(_passes(text, removed), removed)


def redact_text(text: str) -> str:
    """text with every secret-looking value replaced (what was removed is not kept)."""
    return _passes(text, Counter())


def redact_bytes(data: bytes) -> tuple[bytes, int]:
    """Bytes (a file's, perhaps not UTF-8) with every secret-looking value replaced, and how
    many were; bytes that are not UTF-8 pass through unchanged, so that only secrets differ."""
    if not data:
        return data, 0
    red = redact(data.decode("utf-8", "surrogateescape"))
    return (red.text.encode("utf-8", "surrogateescape") if red.count else data), red.count


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
