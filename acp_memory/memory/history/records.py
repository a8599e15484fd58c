"""What the journal records, as readers get it: a change, a held change and where each came
from, their ids and the user's message as a source keeps it."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from acp_memory.memory.redact import redact_text

CHANGE_COLUMNS = ("seq, id, time, scope, root, path, action, before, after, surface, "
                   "session_id, task_id, message, undoes")



@dataclass(frozen=True)
class ChangeSource:
    """Where a change came from: the surface, and for a turn its session, task and message."""

    surface: str
    session_id: str | None = None
    task_id: str | None = None
    message: str | None = None  # the first line of the turn's user message, redacted
    # Who on the team made it (the shared project root records them; self-reported, not
    # authentication): the OS user and the host.
    user: str | None = None
    host: str | None = None

    def as_json(self) -> dict[str, str | None]:
        shown: dict[str, str | None] = {"surface": self.surface, "sessionId": self.session_id,
                                        "taskId": self.task_id, "message": self.message}
        # Only when set: the disk history's JSON stays as it was.
        shown.update({k: v for k, v in (("user", self.user), ("host", self.host)) if v})
        return shown


@dataclass(frozen=True)
class Change:
    """One journaled change: `path` is relative to `root` (a folder's path has no slash)."""

    seq: int
    id: str
    time: str
    scope: str
    root: str
    path: str
    action: str
    before: str | None
    after: str | None
    source: ChangeSource
    undoes: str | None = None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Change:
        seq, cid, time, scope, root, path, action, before, after = row[:9]
        return cls(seq, cid, time, scope, root, path, action, before, after,
                   ChangeSource(*row[9:13]), row[13])


HELD_COLUMNS = ("id, time, scope, root, path, action, before, after, surface, session_id, "
                 "task_id, message, reason, parts")


@dataclass(frozen=True)
class HeldPart:
    """One more path a held change makes with its own (a merge's notes merged away)."""

    path: str
    action: str
    before: str | None
    after: str | None

    def as_json(self) -> dict[str, str | None]:
        return {"path": self.path, "action": self.action, "before": self.before,
                "after": self.after}

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> HeldPart:
        return cls(str(item["path"]), str(item["action"]), item.get("before"), item.get("after"))


def parts_json(parts: Sequence[HeldPart]) -> str | None:
    """How a journal keeps a held change's other paths (None: it has none)."""
    return json.dumps([p.as_json() for p in parts]) if parts else None


def parts_of(stored: str | list[Any] | None) -> tuple[HeldPart, ...]:
    """A held change's other paths as a journal kept them (JSON text, or JSON read already)."""
    items = json.loads(stored) if isinstance(stored, str) else stored or []
    return tuple(HeldPart.from_json(item) for item in items)


@dataclass(frozen=True)
class Held:
    """A change held for approval (`pnd_` + 12 hex), as it would be made."""

    id: str
    time: str
    scope: str
    root: str
    path: str
    action: str
    before: str | None
    after: str | None
    source: ChangeSource
    reason: str | None = None  # why it was proposed, in a line (a tidy run's proposals)
    # The other paths it makes with `path`, all or none (a merge: the notes merged away).
    parts: tuple[HeldPart, ...] = ()
    undoes: ClassVar[None] = None  # as a Change reads: a held change undoes none

    @property
    def all_parts(self) -> tuple[HeldPart, ...]:
        """Every path it makes, its own first."""
        return (HeldPart(self.path, self.action, self.before, self.after), *self.parts)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Held:
        pid, time, scope, root, path, action, before, after = row[:8]
        return cls(pid, time, scope, root, path, action, before, after, ChangeSource(*row[8:12]),
                   row[12], parts_of(row[13]))


def change_message(text: str) -> str:
    """How a source keeps the user's message: its first line, redacted, at most 200
    characters."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return redact_text(line)[:200]


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(6)}"
