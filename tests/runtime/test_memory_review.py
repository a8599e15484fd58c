"""memory.review: ask through the ACP client: a memory run's save asks the parent session
(`session/request_permission`, tool call `mem_<taskId>_<n>`), then one tool_call_update;
allow once, reject, allow for this session, and a question still open when the turn ends
(held as pending, then approved)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest
from acp.schema import RequestPermissionResponse
from engine.turnkit import prompt, turn_agent, turn_context_text
from fakes.script import call, text, tool_calls
from harness import Editor, RecordingClient, in_process_agent
from runtime.test_memory_run import MemoryRoutedOpenAI, memory_config
from runtime.test_memory_run_acceptance import child_messages
from wire_schema import validate_def

from acp_memory.acp.server import build_agent
from acp_memory.config import Config, Paths
from acp_memory.config.models import ModelConfig, ProviderConfig
from acp_memory.llm.registry import ProviderHub
from acp_memory.memory.history.journal import Journal
from acp_memory.memory.history.pending import approve
from acp_memory.memory.store import MemoryStore
from acp_memory.tools.base import ToolContext, ToolKind, ToolResult

pytestmark = pytest.mark.anyio

SAVE = {"title": "Tea", "body": "The user drinks green tea.\n", "scope": "global",
        "relative_path": "tea.md"}
COFFEE = {"title": "Coffee", "body": "The user drinks no coffee.\n", "scope": "global",
          "relative_path": "coffee.md"}


def sent(ed: Editor, method: str) -> list[dict[str, Any]]:
    """The params of every message of one method the agent sent, read off the wire."""
    return [m["params"] for m in ed.checker.sent if m.get("method") == method]


def review_updates(ed: Editor, call_id: str) -> list[dict[str, Any]]:
    """The session/update messages (whole params) about one review question."""
    return [p for p in sent(ed, "session/update")
            if p["update"].get("toolCallId") == call_id]


def journal(paths: Paths) -> Journal:
    return Journal(paths.home / "history" / "journal.sqlite3")


async def test_allow_once_asks_the_parent_session_then_writes_the_note(paths: Paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [tool_calls(call("memory_save", SAVE)), text("Saved: green tea.")]
        server.script(text("Noted."))
        async with turn_agent(memory_config(server, review="ask"), paths) as (ed, _):
            ed.client.permission_answers = ["allow_once"]
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "I drink green tea") == "end_turn"
            (asked,) = sent(ed, "session/request_permission")
            updates = review_updates(ed, "mem_bg_1_1")
            parent_calls = [p for p in sent(ed, "session/update")
                            if p["update"]["sessionUpdate"] == "tool_call"]
    note = paths.home / "memory" / "tea.md"
    assert note.read_text() == SAVE["body"]
    # The question, exactly as pinned: the parent session, mem_<taskId>_<n>, one diff.
    validate_def("RequestPermissionRequest", asked)
    assert asked["sessionId"] == sid
    assert asked["toolCall"] == {
        "toolCallId": "mem_bg_1_1",
        "title": "Memory Save global:tea.md",
        "kind": "edit",
        "status": "pending",
        "content": [{"type": "diff", "path": str(note), "oldText": None,
                     "newText": SAVE["body"]}],
        "locations": [{"path": str(note)}],
    }
    assert [o["optionId"] for o in asked["options"]] == ["allow_once", "allow_session", "reject"]
    assert [o["kind"] for o in asked["options"]] == ["allow_once", "allow_always", "reject_once"]
    # Then exactly one update for it, and nothing else of the child on the parent's stream.
    (update,) = updates
    validate_def("SessionNotification", update)
    assert update["sessionId"] == sid
    assert update["update"]["sessionUpdate"] == "tool_call_update"
    assert update["update"]["status"] == "completed"
    assert not parent_calls


async def test_reject_writes_nothing_and_the_offline_childs_report_says_declined(paths: Paths):
    async with MemoryRoutedOpenAI() as server:
        server.script(text("Fine."))
        cfg = offline_child(memory_config(server, review="ask"))
        async with turn_agent(cfg, paths) as (ed, _):
            ed.client.permission_answers = ["reject"]
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "Remember that I drink green tea.") == "end_turn"
            (asked,) = sent(ed, "session/request_permission")
            call_id = asked["toolCall"]["toolCallId"]
            (update,) = review_updates(ed, call_id)
    assert call_id == "mem_bg_1_1"
    assert not list((paths.home / "memory").rglob("*.md"))
    assert update["update"]["status"] == "failed"
    said = turn_context_text(server.parent_requests[0])
    assert "Not saved: the user declined: nothing was written to global:" in said


async def test_allow_for_this_session_lets_a_later_turns_save_write_without_asking(paths: Paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [tool_calls(call("memory_save", SAVE)), text("Saved."),
                        tool_calls(call("memory_save", COFFEE)), text("Saved.")]
        server.script(text("Noted."), text("Noted again."))
        async with turn_agent(memory_config(server, review="ask"), paths) as (ed, _):
            # One answer only: a second question would find none (and hold the change).
            ed.client.permission_answers = ["allow_session"]
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "I drink green tea") == "end_turn"
            assert await prompt(ed, sid, "I drink no coffee") == "end_turn"
            asked = sent(ed, "session/request_permission")
            later = review_updates(ed, "mem_bg_2_1")
    assert len(asked) == 1 and len(ed.client.permission_requests) == 1
    assert not later
    assert (paths.home / "memory" / "tea.md").read_text() == SAVE["body"]
    assert (paths.home / "memory" / "coffee.md").read_text() == COFFEE["body"]


class SlowToAnswer(RecordingClient):
    """An editor whose user answers only once the test lets them (after the turn ended)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = anyio.Event()
        self.answer = anyio.Event()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_answers = ["allow_once"]
        self.asked.set()
        await self.answer.wait()
        return await super().request_permission(session_id, tool_call, options)


class WaitForQuestion:
    """The parent's tool: returns once the memory run's question reached the editor."""

    name = "wait_for_question"
    description = "Wait until the memory run asks."
    kind: ToolKind = "other"
    read_only = True
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

    def __init__(self, asked: anyio.Event) -> None:
        self.asked = asked

    def title(self, args: Mapping[str, Any]) -> str:
        return "Wait for the question"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        await self.asked.wait()
        return ToolResult("asked")


async def test_a_question_open_when_the_turn_ends_is_withdrawn_held_and_approved_later(
    paths: Paths,
):
    client = SlowToAnswer()
    async with MemoryRoutedOpenAI() as server:
        server.child = [tool_calls(call("memory_save", SAVE)), text("Held for approval.")]
        server.script(tool_calls(call("wait_for_question", {})), text("Done."))
        cfg = memory_config(server, review="ask", wait_seconds=0)
        async with ProviderHub(cfg) as hub:
            agent = build_agent(cfg, paths, hub)
            agent.runner.engine.tools.add(WaitForQuestion(client.asked))
            async with in_process_agent(cfg, paths, agent, client) as ed:
                sid = await ed.start_session(paths.cwd)
                assert await prompt(ed, sid, "I drink green tea") == "end_turn"
                await ed.client.wait_for(lambda: review_updates(ed, "mem_bg_1_1"))
                (update,) = review_updates(ed, "mem_bg_1_1")
                client.answer.set()  # too late: the question was withdrawn
                with anyio.fail_after(10):
                    task = agent.runner.pool_for(await agent.session(sid)).get("bg_1")
                    assert task is not None
                    await task.done.wait()
    note = paths.home / "memory" / "tea.md"
    assert not note.exists()
    history = journal(paths)
    try:
        (held,) = history.held(session_id=sid)
        assert (held.scope, held.path, held.action) == ("global", "tea.md", "create")
        assert (held.source.surface, held.source.task_id) == ("memory_run", "bg_1")
        # The question's one update says it failed, pointing at the held change; the
        # child's tool result says it was held.
        assert update["update"]["status"] == "failed"
        assert f"held for approval ({held.id})" in update["update"]["content"][0]["content"]["text"]
        results = [m["content"] for m in child_messages(paths, sid) if m["role"] == "tool"]
        assert results == [f"held for approval ({held.id}): global:tea.md changes once the user "
                           f"approves it (`acp-memory notes approve {held.id}`); nothing was "
                           "written yet"]
        with MemoryStore.from_config(cfg, paths, journal=history) as store:
            approve(store, held.id)
        assert note.read_text() == SAVE["body"]
        assert not history.held()
    finally:
        history.close()


def offline_child(cfg: Config) -> Config:
    """cfg with the memory child on the built-in offline model (its report is deterministic)."""
    cfg.providers.append(ProviderConfig(name="offline", type="offline"))
    cfg.models.append(ModelConfig(model="offline/default"))
    cfg.memory.model = "offline/default"
    return cfg


async def test_remember_asks_like_a_turns_memory_run_and_writes_once_allowed(paths: Paths):
    async with MemoryRoutedOpenAI() as server:
        cfg = offline_child(memory_config(server, review="ask"))
        async with turn_agent(cfg, paths) as (ed, _):
            ed.client.permission_answers = ["allow_once"]
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "/remember I drink green tea.") == "end_turn"
            (asked,) = sent(ed, "session/request_permission")
            (update,) = review_updates(ed, asked["toolCall"]["toolCallId"])
    assert asked["toolCall"]["toolCallId"] == "mem_bg_1_1"
    assert update["update"]["status"] == "completed"
    assert [p.read_text() for p in (paths.home / "memory").rglob("*.md")] == [
        "I drink green tea.\n"]
