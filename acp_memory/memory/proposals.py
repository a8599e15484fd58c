"""A tidy run's one writing tool, `propose_change`: a full new body for a note, a merge of notes
into one, or a delete, each with a one-line reason.

Nothing is written by a proposal itself: it is held (`pnd_…`, with its reason; a merge is one
held change over every path it touches, approved or rejected whole), or, when the user asked
for it at once (`notes tidy --apply`), held and approved in the same call, so that each path
it changes is a journaled change `notes undo` reverses. Both go through `history/pending.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from acp_memory.memory.history import pending
from acp_memory.memory.history.journal import JournalError, Part
from acp_memory.memory.history.records import Held
from acp_memory.memory.history.states import Captured, capture
from acp_memory.memory.roots import Location, MemoryPathError
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.memory.tools import MemoryTool, _arg, _schema
from acp_memory.tools.base import Tool

PROPOSE_TOOL = "propose_change"
KINDS = ("update", "merge", "delete")
REASON_CHARS = 200


@dataclass
class Proposals:
    """The proposals of one tidy run over a store: held, or made at once with `apply`."""

    store: MemoryStore
    apply: bool = False
    held: list[Held] = field(default_factory=list)  # in the order proposed
    made: list[Held] = field(default_factory=list)  # with apply: those approved at once
    refused: list[str] = field(default_factory=list)  # with apply: why one was not made

    def propose(self, kind: str, paths: list[str], body: str, reason: str) -> str:
        """Hold (or make) one proposal; the tool result's text. NoteError says why not."""
        reason = " ".join(reason.split())[:REASON_CHARS]
        if kind not in KINDS:
            raise NoteError(f"kind must be one of {', '.join(KINDS)}")
        if not reason:
            raise NoteError("a proposal needs a one-line reason")
        wanted = 2 if kind == "merge" else 1
        if len(paths) < wanted or (kind != "merge" and len(paths) > 1):
            raise NoteError("a merge names the note it keeps first, then the notes merged into "
                            "it" if kind == "merge" else f"{kind} names exactly one note")
        if kind != "delete" and not body.strip():
            raise NoteError(f"{kind} needs the note's whole new body")
        if self.store.journal is None:
            raise NoteError("this store keeps no history to hold a proposal in")
        first, parts = self._parts(kind, paths, body)
        loc, action, before, after = first
        try:
            held = self.store.journal.hold((loc.scope, loc.root, loc.rel), action, before,
                                           after, self.store.source, reason=reason,
                                           parts=parts)
        except JournalError as exc:
            raise NoteError(f"cannot hold the change of {loc.display}: {exc}; nothing was "
                            "written") from None
        self.held.append(held)
        shown = ", ".join(self._display(loc, p) for p in (loc.rel, *(p[0] for p in parts)))
        if not self.apply:
            return f"held for approval ({held.id}): {kind} {shown}: {reason}"
        try:
            pending.approve(self.store, held.id)
        except NoteError as exc:
            pending.reject(self.store, held.id)
            self.refused.append(f"{held.id}: {exc}")
            raise
        self.made.append(held)
        return f"made ({held.id}): {kind} {shown}: {reason}"

    @staticmethod
    def _display(loc: Location, rel: str) -> str:
        return f"{loc.scope}:{rel}"

    def _parts(self, kind: str, paths: list[str], body: str
               ) -> tuple[tuple[Location, str, Captured, Captured], list[Part]]:
        """The change of the first path and the other paths' parts, all in its root."""
        locs = [self._existing(p) for p in paths]
        if len({(loc.scope, loc.root) for loc in locs}) > 1:
            raise NoteError("a merge keeps its notes in one root")
        if len({loc.rel for loc in locs}) < len(locs):
            raise NoteError("a merge names each note once")
        first = locs[0]
        before = capture(first.path)
        if kind == "delete":
            return (first, "delete", before, Captured(None)), []
        _, _, data = self.store.prepare_write(f"{first.scope}:{first.rel}", body)
        after = Captured.note(data, redacted=True)
        return (first, "update", before, after), [
            (loc.rel, "delete", capture(loc.path), Captured(None)) for loc in locs[1:]]

    def _existing(self, path: str) -> Location:
        try:
            loc = self.store.note_location(path)
        except MemoryPathError as exc:
            raise NoteError(str(exc)) from None
        if not loc.path.is_file() or loc.path.is_symlink():
            raise NoteError(f"{loc.display} is not a note; a tidy run changes existing notes")
        return loc


def propose_tool(proposals: Proposals) -> Tool:
    """`propose_change` over the proposals of a run (see the module's docstring)."""

    def handler(args: Mapping[str, Any]) -> str:
        paths = args.get("paths")
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise NoteError("argument 'paths' must be a list of scope:path strings (required)")
        return proposals.propose(_arg(args, "kind") or "", paths,
                                 _arg(args, "body", required=False) or "",
                                 _arg(args, "reason") or "")

    return MemoryTool(
        PROPOSE_TOOL,
        "Propose one change of the notes, held for the user's approval (nothing is written "
        "now): kind `update` replaces one note's whole body; `merge` keeps the first path "
        "with the given body and deletes the others (one change, approved or rejected whole); "
        "`delete` removes one note. Each needs a one-line reason.",
        "edit",
        _schema({
            "kind": {"type": "string", "enum": list(KINDS)},
            "paths": {"type": "array", "items": {"type": "string"},
                      "description": "scope:path of each note; a merge's kept note first"},
            "body": {"type": "string", "description": "the whole new body (update, merge)"},
            "reason": {"type": "string", "description": "why, in one line"},
        }, ["kind", "paths", "reason"]),
        False, handler, "kind",
    )
