"""memory.review: ask: the user's consent before a memory run (or the inline `memory` tool)
saves or deletes a note.

The proposed change is computed first (the redacted text and the text it replaces, or what a
delete removes), the question asked outside the root's lock, and the change then made only
if the note is still what was shown. A change nobody can be asked about (no editor, the turn
ended first, the editor cannot answer) is held as pending (`history/pending.py`), never lost.

A memory run's question is the one thing of the child that reaches the parent's stream: a
`session/request_permission` for the parent session whose tool call id is `mem_<taskId>_<n>`,
then one `tool_call_update` (completed or failed) once it is settled.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import anyio

from acp_memory.editor import Editor
from acp_memory.memory.history.journal import JournalError
from acp_memory.memory.history.records import Held
from acp_memory.memory.history.states import Captured, capture
from acp_memory.memory.roots import Location, is_note_name
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.tools.base import ToolError, ToolResult
from acp_memory.tools.permissions import PermissionGate

log = logging.getLogger(__name__)

ALLOW_ONCE = "allow_once"
ALLOW_SESSION = "allow_session"
REJECT = "reject"
OPTIONS: list[dict[str, str]] = [
    {"optionId": ALLOW_ONCE, "name": "Allow once", "kind": "allow_once"},
    {"optionId": ALLOW_SESSION, "name": "Allow for this session", "kind": "allow_always"},
    {"optionId": REJECT, "name": "Reject", "kind": "reject_once"},
]
# How a tool result for a change held for approval begins (the offline child reads it too).
HELD_PREFIX = "held for approval ("
# How long the end of a turn waits for its withdrawn questions to be held and told.
SETTLE_BOUND_SECONDS = 5.0
# Says a question's end on the parent's stream: (tool call id, status, message).
Tell = Callable[[str, Literal["completed", "failed"], str], Awaitable[None]]


@runtime_checkable
class Reviewer(Protocol):
    """Who answers the review questions of a turn: the user through the editor, or a rule."""

    # Whether the answer needs the user of the turn (so a question still open when the turn
    # ends is withdrawn); a rule answers at any time.
    attended: bool

    async def review(
        self, session_id: str, tool_call: Mapping[str, Any], options: Sequence[Mapping[str, str]]
    ) -> str | None:
        """The option picked; None when nobody can answer (the change is then held)."""
        ...

    def held(self, display: str, pending_id: str) -> None:
        """A change was held for approval instead of asked about."""
        ...


class EditorReviewer:
    """The user, asked through the editor's session/request_permission."""

    attended = True

    def __init__(self, editor: Editor) -> None:
        self.editor = editor

    async def review(
        self, session_id: str, tool_call: Mapping[str, Any], options: Sequence[Mapping[str, str]]
    ) -> str | None:
        try:
            return await self.editor.request_permission(session_id, tool_call, options)
        except ToolError as exc:  # an editor that cannot answer: the change is held
            log.warning("cannot ask about a memory change: %s", exc)
            return None

    def held(self, display: str, pending_id: str) -> None:
        return None  # the question's tool_call_update says it


def reviewer_for(editor: Editor | None) -> Reviewer | None:
    """The turn's reviewer: an editor that answers by a rule itself (print mode's), else the
    user through the editor; None without one (the HTTP API)."""
    if editor is None:
        return None
    return editor if isinstance(editor, Reviewer) else EditorReviewer(editor)


class TurnQuestions:
    """The review questions of one turn of a session: asked through its reviewer while it
    runs, withdrawn when it ends; "allow for this session" is kept in the session's grants."""

    def __init__(
        self,
        session_id: str,
        reviewer: Reviewer | None,
        grants: PermissionGate | None,
        tell: Tell | None = None,
    ) -> None:
        self.session_id = session_id
        self.reviewer = reviewer
        self.grants = grants
        self.tell = tell  # None: the question's own tool call says how it ended (inline tool)
        self._open = True
        self._asking: set[anyio.CancelScope] = set()
        self._settling: set[anyio.Event] = set()

    @property
    def can_ask(self) -> bool:
        return self._open and self.reviewer is not None

    async def allowed(self) -> bool:
        """Whether the user allowed every memory write of this session already."""
        if self.grants is None:
            return False
        return await anyio.to_thread.run_sync(self.grants.memory_writes_allowed)

    async def ask(self, tool_call: Mapping[str, Any]) -> str | None:
        """The option the reviewer picked; None when withdrawn or unanswerable."""
        if not self.can_ask:
            return None
        assert self.reviewer is not None
        with anyio.CancelScope() as scope:
            self._asking.add(scope)
            try:
                return await self.reviewer.review(self.session_id, tool_call, OPTIONS)
            finally:
                self._asking.discard(scope)
        return None  # withdrawn: the turn ended

    @contextlib.contextmanager
    def settling(self) -> Iterator[None]:
        """A question from its asking to its tool_call_update (close() waits for it)."""
        done = anyio.Event()
        self._settling.add(done)
        try:
            yield
        finally:
            done.set()
            self._settling.discard(done)

    async def close(self) -> None:
        """The turn ended: an attended question still open is withdrawn (its change held)
        and its update told, within a bound; no later question is asked."""
        if self.reviewer is None or not self.reviewer.attended:
            return  # a rule answers after the turn as well (print mode's --yes)
        self._open = False
        for scope in list(self._asking):
            scope.cancel()
        with anyio.move_on_after(SETTLE_BOUND_SECONDS):
            for done in list(self._settling):
                await done.wait()


@dataclass(frozen=True)
class Proposal:
    """A save or a delete as it would be made, computed before the question."""

    loc: Location
    display: str  # scope:path (a folder's with a slash)
    action: str  # create, update, delete or rmdir
    before: Captured
    after: Captured
    diffs: list[dict[str, Any]]  # ACP diff content, one per note
    current: str | None = None  # a save: the note's text as shown (None: a new note)

    @property
    def paths(self) -> list[str]:
        return [d["path"] for d in self.diffs]


def propose_write(store: MemoryStore, path: str, content: str, extra: Any = None) -> Proposal:
    """What store.write(path, content) would change (a worker thread)."""
    loc, _, data = store.prepare_write(path, content, extra)
    if loc.path.is_dir():
        raise NoteError(f"{loc.display} is a folder; choose a note path ending in .md")
    try:
        old: bytes | None = loc.path.read_bytes()
    except FileNotFoundError:
        old = None
    current = None if old is None else old.decode("utf-8", errors="replace")
    diff = {"type": "diff", "path": str(loc.path), "oldText": current,
            "newText": data.decode("utf-8")}
    before = Captured(None) if old is None else Captured.note(old)
    return Proposal(loc, loc.display, "create" if old is None else "update", before,
                    Captured.note(data, redacted=True), [diff], current)


def propose_delete(store: MemoryStore, path: str) -> Proposal:
    """What store.delete(path) would remove (a worker thread): one diff per note."""
    planned = store.plan_delete(path)
    loc = store.locate(path)
    notes = [loc.path]
    if planned.was_folder:
        notes = sorted(p for p in loc.path.rglob("*")
                       if is_note_name(p.name) and p.is_file() and not p.is_symlink())
    diffs = [{"type": "diff", "path": str(p), "oldText": _text(p), "newText": ""} for p in notes]
    return Proposal(loc, planned.path, "rmdir" if planned.was_folder else "delete",
                    capture(loc.path), Captured(None), diffs)


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


class Review:
    """The consent of one memory run (or one inline tool call) for its writes: ask, then
    make the change, or hold it."""

    def __init__(
        self, store: MemoryStore, questions: TurnQuestions, call_id: Callable[[], str]
    ) -> None:
        self.store = store
        self.questions = questions
        self.call_id = call_id

    @classmethod
    def for_run(cls, store: MemoryStore, questions: TurnQuestions) -> Review:
        """A memory run's: its questions are `mem_<taskId>_<n>`, n counting from 1 (the
        store's source names the task once the run has started)."""
        counter = itertools.count(1)
        return cls(store, questions, lambda: f"mem_{store.source.task_id}_{next(counter)}")

    async def change(
        self, proposal: Proposal, make: Callable[[Proposal], Awaitable[ToolResult]]
    ) -> ToolResult:
        """The tool result of the proposed change: made (make) once allowed, refused, or held."""
        questions = self.questions
        if await questions.allowed():
            return await make(proposal)
        if not questions.can_ask:
            return await self._hold(proposal)
        call_id = self.call_id()
        with questions.settling():
            try:
                answer = await questions.ask(self._tool_call(call_id, proposal))
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True), anyio.move_on_after(SETTLE_BOUND_SECONDS):
                    await self._tell(call_id, "failed", "the memory run stopped; nothing was "
                                                        "written")
                raise
            if answer is None:
                held = await self._hold(proposal)
                await self._tell(call_id, "failed", f"not answered while the turn ran: "
                                                    f"{held.text}")
                return held
            if answer in (ALLOW_ONCE, ALLOW_SESSION):
                if answer == ALLOW_SESSION and questions.grants is not None:
                    await anyio.to_thread.run_sync(questions.grants.allow_memory_writes)
                result = await make(proposal)
                await self._tell(call_id, "failed" if result.is_error else "completed",
                                 result.text)
                return result
            declined = f"the user declined: nothing was written to {proposal.display}"
            await self._tell(call_id, "failed", declined)
            return ToolResult(f"Error: {declined}", is_error=True)

    async def _hold(self, proposal: Proposal) -> ToolResult:
        journal = self.store.journal
        if journal is None:
            return ToolResult(f"Error: {proposal.display} needs the user's approval and this "
                              "store keeps no history to hold it in; nothing was written",
                              is_error=True)
        loc = proposal.loc
        try:
            held: Held = await anyio.to_thread.run_sync(
                journal.hold, (loc.scope, loc.root, loc.rel), proposal.action, proposal.before,
                proposal.after, self.store.source)
        except JournalError as exc:  # a change that cannot be kept is not made
            return ToolResult(f"Error: cannot hold the change of {proposal.display} for "
                              f"approval: {exc}; nothing was written", is_error=True)
        if self.questions.reviewer is not None:
            self.questions.reviewer.held(proposal.display, held.id)
        return ToolResult(f"{HELD_PREFIX}{held.id}): {proposal.display} changes once the "
                          f"user approves it (`acp-memory notes approve {held.id}`); nothing was "
                          "written yet")

    def _tool_call(self, call_id: str, proposal: Proposal) -> dict[str, Any]:
        verb = "Delete" if proposal.action in ("delete", "rmdir") else "Save"
        return {
            "toolCallId": call_id,
            "title": f"Memory {verb} {proposal.display}",
            "kind": "delete" if verb == "Delete" else "edit",
            "status": "pending",
            "content": proposal.diffs,
            "locations": [{"path": p} for p in proposal.paths],
        }

    async def _tell(self, call_id: str, status: Literal["completed", "failed"], text: str) -> None:
        tell, reviewer = self.questions.tell, self.questions.reviewer
        if tell is None or reviewer is None or not reviewer.attended:
            return  # a rule's answer is no question the parent's stream was shown
        try:
            await tell(call_id, status, text)
        except Exception as exc:  # the client's trouble must not fail the write's result
            log.warning("cannot send the memory review update %s: %s", call_id, exc)
