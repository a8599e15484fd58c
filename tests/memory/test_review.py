"""memory.review: ask below the surfaces: the question's content (one diff per note), a change
made meanwhile, holding without anyone to ask, the inline `memory` tool, print mode's rule,
and held changes expiring after memory.pending_days."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from acp_memory.config import Config, Paths
from acp_memory.config.models import MemoryConfig, ToolsConfig
from acp_memory.llm.offline.child_steps import HELD
from acp_memory.memory.direct import DirectMemoryTool
from acp_memory.memory.history.journal import Journal
from acp_memory.memory.history.pending import approve
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.history.states import Captured
from acp_memory.memory.history.undo import ChangedSince
from acp_memory.memory.review import HELD_PREFIX, Review, TurnQuestions, reviewer_for
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore
from acp_memory.memory.tools import memory_tools
from acp_memory.printmode.unattended import Unattended
from acp_memory.tools.base import ToolContext
from acp_memory.tools.permissions import PermissionGate
from acp_memory.tools.registry import ToolSet

pytestmark = pytest.mark.anyio

SID = "sess_" + "0" * 24


class AskedEditor:
    """An editor whose user picks `answers` in order; `before_answer` runs as they think."""

    can_read_files = can_write_files = can_run_terminals = False
    user_is_the_command_line = False

    def __init__(self, *answers: str, before_answer: Callable[[], None] | None = None) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.before_answer = before_answer

    async def request_permission(
        self, session_id: str, tool_call: Mapping[str, Any], options: Sequence[Mapping[str, str]]
    ) -> str | None:
        self.asked.append((session_id, dict(tool_call)))
        if self.before_answer is not None:
            self.before_answer()
        return self.answers.pop(0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    roots = Roots(tmp_path / "home" / "memory", tmp_path / "work" / "memory")
    journal = Journal(tmp_path / "home" / "history" / "journal.sqlite3")
    with MemoryStore(roots, tmp_path / "home" / "cache", journal=journal,
                     source=ChangeSource("memory_run", SID, "bg_3", "note it")) as store:
        yield store
    journal.close()


def tools_of(store: MemoryStore, reviewer: Any) -> ToolSet:
    review = Review.for_run(store, TurnQuestions(SID, reviewer, None))
    return ToolSet(memory_tools(store, MemoryConfig(), review))


async def run(tools: ToolSet, name: str, **args: Any) -> tuple[str, bool]:
    result = await tools.execute(name, json.dumps(args), ToolContext(SID, Path("."), "agent"))
    return result.text, result.is_error


async def test_a_folder_delete_shows_one_diff_per_note_and_a_reject_removes_nothing(store):
    folder = store.roots.root_of("global") / "notes"
    folder.mkdir(parents=True)
    (folder / "a.md").write_text("alpha\n")
    (folder / "b.md").write_text("beta\n")
    editor = AskedEditor("reject")
    out, err = await run(tools_of(store, _reviewer(editor)), "memory_delete", path="global:notes")
    assert err and out == "Error: the user declined: nothing was written to global:notes/"
    assert sorted(p.name for p in folder.iterdir()) == ["a.md", "b.md"]
    ((session_id, asked),) = editor.asked
    assert session_id == SID
    assert asked["toolCallId"] == "mem_bg_3_1"
    assert (asked["kind"], asked["title"]) == ("delete", "Memory Delete global:notes/")
    assert asked["content"] == [
        {"type": "diff", "path": str(folder / "a.md"), "oldText": "alpha\n", "newText": ""},
        {"type": "diff", "path": str(folder / "b.md"), "oldText": "beta\n", "newText": ""},
    ]
    assert asked["locations"] == [{"path": str(folder / "a.md")}, {"path": str(folder / "b.md")}]


async def test_the_questions_of_a_run_count_from_one(store):
    editor = AskedEditor("allow_once", "allow_once")
    tools = tools_of(store, _reviewer(editor))
    for title in ("One", "Two"):
        out, err = await run(tools, "memory_save", title=title, body=f"{title}.", scope="global")
        assert not err, out
    assert [a["toolCallId"] for _, a in editor.asked] == ["mem_bg_3_1", "mem_bg_3_2"]
    assert [a["content"][0]["oldText"] for _, a in editor.asked] == [None, None]


async def test_a_note_changed_while_the_user_was_asked_is_left_as_it_is(store):
    note = store.roots.root_of("global") / "tea.md"
    note.parent.mkdir(parents=True)
    note.write_text("green\n")
    editor = AskedEditor("allow_once", before_answer=lambda: note.write_text("black\n"))
    out, err = await run(tools_of(store, _reviewer(editor)), "memory_save", title="Tea",
                         body="oolong\n", scope="global", relative_path="tea.md")
    assert err and "was changed by someone else since you opened it; nothing was written" in out
    assert note.read_text() == "black\n"
    assert editor.asked[0][1]["content"][0]["oldText"] == "green\n"


async def test_a_delete_of_a_note_changed_while_the_user_was_asked_deletes_nothing(store):
    note = store.roots.root_of("global") / "tea.md"
    note.parent.mkdir(parents=True)
    note.write_text("green\n")
    editor = AskedEditor("allow_once", before_answer=lambda: note.write_text("black\n"))
    out, err = await run(tools_of(store, _reviewer(editor)), "memory_delete", path="global:tea.md")
    assert err and "changed by someone else since it was shown; nothing was deleted" in out
    assert note.read_text() == "black\n"


async def test_without_anyone_to_ask_the_change_is_held_not_lost(store):
    out, err = await run(tools_of(store, None), "memory_save", title="Tea", body="green\n",
                         scope="global", relative_path="tea.md")
    assert store.journal is not None
    (held,) = store.journal.held(session_id=SID)
    assert not err and out.startswith(f"held for approval ({held.id}): global:tea.md")
    assert (held.path, held.action, held.source.task_id) == ("tea.md", "create", "bg_3")
    assert not (store.roots.root_of("global") / "tea.md").exists()


async def test_a_change_after_the_turn_ended_is_held_without_a_question_or_an_update(store):
    editor = AskedEditor("allow_once")
    told: list[tuple[str, str, str]] = []

    async def tell(call_id: str, status: Any, text: str) -> None:
        told.append((call_id, status, text))

    questions = TurnQuestions(SID, _reviewer(editor), None, tell)
    await questions.close()  # the parent's turn ended before the run's save
    tools = ToolSet(memory_tools(store, MemoryConfig(), Review.for_run(store, questions)))
    out, err = await run(tools, "memory_save", title="Tea", body="green\n", scope="global",
                         relative_path="tea.md")
    assert not err and out.startswith(HELD_PREFIX)
    assert (editor.asked, told) == ([], [])
    assert not (store.roots.root_of("global") / "tea.md").exists()


async def test_print_modes_rule_makes_the_change_with_yes_and_holds_it_otherwise(store):
    said: list[str] = []
    held = Unattended(allow=False, permission_mode="ask", say=said.append)
    out, _ = await run(tools_of(store, held), "memory_save", title="Tea", body="green\n",
                       scope="global", relative_path="tea.md")
    assert out.startswith(HELD_PREFIX)
    (line,) = said
    assert line.startswith("memory change held for approval (pnd_") and "global:tea.md" in line
    assert "acp-memory notes pending" in line
    yes = Unattended(allow=True, permission_mode="ask", say=said.append)
    out, err = await run(tools_of(store, yes), "memory_save", title="Tea", body="green\n",
                         scope="global", relative_path="tea.md")
    assert not err and out == "saved new note global:tea.md (6 bytes)."
    assert len(said) == 1


async def test_a_rules_answer_tells_the_parents_stream_nothing(store):
    told: list[str] = []

    async def tell(call_id: str, status: Any, text: str) -> None:
        told.append(call_id)

    yes = Unattended(allow=True, permission_mode="ask", say=lambda line: None)
    questions = TurnQuestions(SID, yes, None, tell)
    tools = ToolSet(memory_tools(store, MemoryConfig(), Review.for_run(store, questions)))
    out, err = await run(tools, "memory_save", title="Tea", body="green\n", scope="global",
                         relative_path="tea.md")
    assert not err and out == "saved new note global:tea.md (6 bytes)."
    assert told == []


def test_approving_over_a_note_changed_since_it_was_held_writes_nothing(store):
    loc = store.locate("global:tea.md")
    held = store.journal.hold(("global", loc.root, "tea.md"), "create", Captured(None),
                              Captured.note(b"green\n"), store.source)
    loc.root.mkdir(parents=True)
    loc.path.write_text("written meanwhile\n")
    with pytest.raises(ChangedSince, match=f"global:tea.md changed since {held.id} was held"):
        approve(store, held.id)
    assert loc.path.read_text() == "written meanwhile\n"
    assert [h.id for h in store.journal.held()] == [held.id]


def test_held_changes_expire_after_pending_days(tmp_path: Path):
    db = tmp_path / "journal.sqlite3"
    start = datetime(2030, 1, 1, tzinfo=UTC)
    at = Journal(db, pending_days=7, now=lambda: start)
    held = at.hold(("global", tmp_path / "memory", "tea.md"), "create", Captured(None),
                   Captured.note(b"green\n"), ChangeSource("memory_run", SID, "bg_1"))
    at.close()
    for days, kept in ((6, [held.id]), (8, [])):
        later = Journal(db, pending_days=7, now=lambda d=days: start + timedelta(days=d))
        try:
            assert [h.id for h in later.held()] == kept
        finally:
            later.close()


# -- the inline memory tool ----------------------------------------------------------------


def inline_tool(paths: Paths) -> ToolSet:
    return ToolSet([DirectMemoryTool(Config(memory=MemoryConfig(inline=True, review="ask")),
                                     paths)])


async def test_the_inline_tool_asks_on_its_own_call_then_writes(paths: Paths, tmp_path: Path):
    editor = AskedEditor("allow_once")
    ctx = ToolContext(SID, paths.cwd, "agent", call_id="call_7", bundle=tmp_path / "bundle",
                      editor=editor)  # type: ignore[arg-type]
    args = {"scope": "global", "path": "todo", "content": "Buy milk."}
    result = await inline_tool(paths).execute("memory", json.dumps(args), ctx)
    assert not result.is_error and result.text == "saved new note global:todo.md (9 bytes)."
    note = paths.home / "memory" / "todo.md"
    assert note.read_text() == "Buy milk."
    ((_, asked),) = editor.asked
    assert asked["toolCallId"] == "call_7"
    assert asked["content"] == [{"type": "diff", "path": str(note), "oldText": None,
                                 "newText": "Buy milk."}]


async def test_the_inline_tool_without_an_editor_holds_its_change(paths: Paths):
    ctx = ToolContext(SID, paths.cwd, "agent", call_id="call_1", message="keep the todo")
    args = {"scope": "workspace", "path": "todo", "content": "Buy milk."}
    result = await inline_tool(paths).execute("memory", json.dumps(args), ctx)
    assert not result.is_error
    assert result.text.startswith(HELD_PREFIX) and "workspace:todo.md" in result.text
    assert not (paths.cwd / "memory" / "todo.md").exists()
    journal = Journal(paths.home / "history" / "journal.sqlite3")
    try:
        (held,) = journal.held()
        assert (held.source.surface, held.source.message) == ("memory_tool", "keep the todo")
    finally:
        journal.close()


def test_the_offline_child_reads_held_results_as_the_review_writes_them():
    assert HELD == HELD_PREFIX


def _reviewer(editor: AskedEditor) -> Any:
    return reviewer_for(editor)  # type: ignore[arg-type]


def test_allow_for_this_session_is_kept_beside_the_sessions_other_grants(tmp_path: Path):
    grants = tmp_path / "permission_grants.json"
    grants.write_text(json.dumps({"version": 1, "commands": {"make test": "allow"}}))
    gate = PermissionGate(ToolsConfig(), grants, None)
    assert not gate.memory_writes_allowed()
    gate.allow_memory_writes()
    again = PermissionGate(ToolsConfig(), grants, None)  # as a later turn reads it
    assert again.memory_writes_allowed()
    saved = json.loads(grants.read_text())
    assert saved["commands"] == {"make test": "allow"} and saved["memory"] == {"writes": "allow"}
