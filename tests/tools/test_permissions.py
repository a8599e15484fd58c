"""Permissions through the agent: the user answers session/request_permission in the official
SDK client, per tools.permission_mode, and remembered answers outlive the connection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes.script import call, tool_calls
from filetools_kit import finished_calls, open_session, prompt, scripted_agent, tool_results

from acp_memory.config.models import ToolsConfig
from acp_memory.tools.base import PermissionRequest, ToolContext, ToolError
from acp_memory.tools.permissions import GRANTS_FILE, PermissionGate, allowlisted

pytestmark = pytest.mark.anyio


def write(path: str = "a.txt", content: str = "hello\n") -> Any:
    return tool_calls(call("write_file", {"path": path, "content": content}))


def grants(paths: Any, sid: str) -> dict[str, Any]:
    return json.loads((paths.sessions_dir / sid / GRANTS_FILE).read_text())


async def test_ask_mode_asks_before_a_write_with_the_four_options(paths):
    async with scripted_agent(paths, write(), permission_mode="ask") as (server, ed, _):
        ed.client.permission_answers = ["allow_once"]
        sid = await open_session(ed, paths)
        assert await prompt(ed, sid, "Write.") == "end_turn"
        started = next(u for _, u in ed.client.updates if u.session_update == "tool_call")
    [(asked_sid, tool_call, options)] = ed.client.permission_requests
    assert asked_sid == sid
    assert tool_call.tool_call_id == started.tool_call_id
    assert (tool_call.title, tool_call.kind, tool_call.status) == ("Write a.txt", "edit", "pending")
    assert [(o.option_id, o.name, o.kind) for o in options] == [
        ("allow_once", "Allow once", "allow_once"),
        ("allow_always", "Always allow", "allow_always"),
        ("reject_once", "Reject", "reject_once"),
        ("reject_always", "Always reject", "reject_always"),
    ]
    assert (paths.cwd / "a.txt").read_text() == "hello\n"
    assert tool_results(server) == ["Created a.txt (6 characters)."]
    assert not (paths.sessions_dir / sid / GRANTS_FILE).exists()  # once is not remembered


async def test_allow_once_asks_again_next_time(paths):
    replies = [write("a.txt"), write("b.txt")]
    async with scripted_agent(paths, *replies, permission_mode="ask") as (_, ed, _):
        ed.client.permission_answers = ["allow_once", "allow_once"]
        sid = await open_session(ed, paths)
        await prompt(ed, sid, "Write both.")
    assert len(ed.client.permission_requests) == 2
    assert (paths.cwd / "b.txt").exists()


async def test_allow_always_is_remembered_in_the_bundle_and_survives_session_load(paths):
    async with scripted_agent(paths, write("a.txt"), permission_mode="ask") as (_, ed, _):
        ed.client.permission_answers = ["allow_always"]
        sid = await open_session(ed, paths)
        await prompt(ed, sid, "Write.")
    assert grants(paths, sid)["writes"] == {str(paths.cwd): "allow"}
    # A new connection (a restarted editor) loads the session: the user is not asked again.
    async with scripted_agent(paths, write("b.txt"), permission_mode="ask") as (server, ed, _):
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
        assert await prompt(ed, sid, "Write again.") == "end_turn"
    assert ed.client.permission_requests == []
    assert (paths.cwd / "b.txt").read_text() == "hello\n"
    assert tool_results(server)[-1] == "Created b.txt (6 characters)."


async def test_reject_once_is_a_tool_error_the_model_reads_and_the_turn_goes_on(paths):
    async with scripted_agent(paths, write(), permission_mode="ask") as (server, ed, _):
        ed.client.permission_answers = ["reject_once"]
        sid = await open_session(ed, paths)
        assert await prompt(ed, sid, "Write.") == "end_turn"
        [update] = finished_calls(ed, sid)
    [result] = tool_results(server)
    assert result == "Error: permission denied: the user rejected this (Write a.txt)"
    assert update.status == "failed"
    assert not (paths.cwd / "a.txt").exists()
    assert ed.client.text(sid) == "Done."  # the model answered after reading the refusal


async def test_reject_always_is_remembered_and_refuses_without_asking(paths):
    replies = [write("a.txt"), write("b.txt")]
    async with scripted_agent(paths, *replies, permission_mode="ask") as (server, ed, _):
        ed.client.permission_answers = ["reject_always"]
        sid = await open_session(ed, paths)
        assert await prompt(ed, sid, "Write both.") == "end_turn"
    assert len(ed.client.permission_requests) == 1
    first, second = tool_results(server)
    assert "the user rejected this" in first
    assert "the user chose to always reject this (Write b.txt)" in second
    assert grants(paths, sid)["writes"] == {str(paths.cwd): "reject"}
    assert not (paths.cwd / "a.txt").exists() and not (paths.cwd / "b.txt").exists()


async def test_a_cancelled_permission_request_fails_the_call_and_cancels_the_turn(paths):
    replies = [
        tool_calls(
            call("write_file", {"path": "a.txt", "content": "x"}), call("glob", {"pattern": "*"})
        )
    ]
    async with scripted_agent(paths, *replies, permission_mode="ask") as (server, ed, _):
        ed.client.permission_answers = [None]
        sid = await open_session(ed, paths)
        assert await prompt(ed, sid, "Write.") == "cancelled"
        updates = finished_calls(ed, sid)
    assert [u.status for u in updates] == ["failed"]  # the call after it never started
    assert "cancelled" in updates[0].content[0].content.text
    assert not (paths.cwd / "a.txt").exists()
    assert len(server.requests) == 1  # the model is not asked to go on


async def test_accept_edits_writes_inside_without_asking_but_asks_for_outside(paths, tmp_path):
    outside = tmp_path / "elsewhere" / "notes.txt"
    outside.parent.mkdir()
    outside.write_text("far away\n")
    replies = [write("a.txt"), tool_calls(call("read_file", {"path": str(outside)}))]
    async with scripted_agent(paths, *replies, permission_mode="accept_edits") as (server, ed, _):
        ed.client.permission_answers = ["allow_once"]
        sid = await open_session(ed, paths)
        await prompt(ed, sid, "Write, then read.")
    [(_, tool_call, _)] = ed.client.permission_requests
    assert tool_call.title == f"Read {outside} (outside the workspace)"
    assert [loc.path for loc in tool_call.locations] == [str(outside)]
    assert tool_results(server) == ["Created a.txt (6 characters).", "far away\n"]


async def test_bypass_never_asks_even_outside_the_workspace(paths, tmp_path):
    outside = tmp_path / "elsewhere" / "out.txt"
    async with scripted_agent(paths, write(str(outside)), permission_mode="bypass") as (_, ed, _):
        sid = await open_session(ed, paths)
        await prompt(ed, sid, "Write outside.")
    assert ed.client.permission_requests == []
    assert outside.read_text() == "hello\n"


async def test_outside_paths_remembered_by_folder(paths, tmp_path):
    shared = tmp_path / "shared"
    (shared / "deep").mkdir(parents=True)
    for name in ("a.txt", "deep/b.txt"):
        (shared / name).write_text(name)
    (tmp_path / "other.txt").write_text("other")
    reads = [
        tool_calls(call("read_file", {"path": str(shared / "a.txt")})),
        tool_calls(call("read_file", {"path": str(shared / "deep" / "b.txt")})),
        tool_calls(call("read_file", {"path": str(tmp_path / "other.txt")})),
    ]
    async with scripted_agent(paths, *reads, permission_mode="ask") as (server, ed, _):
        ed.client.permission_answers = ["allow_always", "reject_once"]
        sid = await open_session(ed, paths)
        await prompt(ed, sid, "Read around.")
    assert grants(paths, sid)["folders"] == {str(shared): "allow"}
    asked = [tc.title for _, tc, _ in ed.client.permission_requests]
    assert asked == [
        f"Read {shared / 'a.txt'} (outside the workspace)",
        f"Read {tmp_path / 'other.txt'} (outside the workspace)",
    ]
    assert tool_results(server)[:2] == ["a.txt", "deep/b.txt"]
    assert "the user rejected this" in tool_results(server)[2]


async def test_an_editor_that_cannot_ask_refuses_the_write_with_its_words(paths):
    # The SDK client without a permission answer answers "method not found".
    async with scripted_agent(paths, write(), permission_mode="ask") as (server, ed, _):
        sid = await open_session(ed, paths)
        assert await prompt(ed, sid, "Write.") == "end_turn"
    [result] = tool_results(server)
    assert result.startswith("Error: the editor refused session/request_permission")
    assert not (paths.cwd / "a.txt").exists()


# -- the gate alone ------------------------------------------------------------------------


class AskingEditor:
    """An editor whose user answers from a list, counting the questions."""

    can_read_files = can_write_files = can_run_terminals = False
    user_is_the_command_line = False

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def request_permission(self, session_id: str, tool_call: Any, options: Any) -> Any:
        self.asked.append(tool_call["title"])
        return self.answers.pop(0)


def _ctx(cwd: Path) -> ToolContext:
    return ToolContext("sess_x", cwd, "agent", call_id="call_1")


def _gate(tmp_path: Path, editor: Any, **tools: Any) -> PermissionGate:
    return PermissionGate(ToolsConfig(**tools), tmp_path / GRANTS_FILE, editor)


@pytest.mark.parametrize(
    ("command", "allowed"),
    [
        ("make", True),
        ("make test", True),
        ("makefile-gen", False),
        ("git status", True),
        ("git status --short", True),
        ("git  'status'", True),  # the same words, however spaced or quoted
        ("git push", False),
        ("rm -rf /", False),
    ],
)
def test_the_allowlist_takes_an_entry_exactly_or_followed_by_a_space(command, allowed):
    assert allowlisted(command, ["make", "git status"]) is allowed


# Every way the attack suite chained past `echo hi`, and the neighbours of each.
CHAINED = [
    "echo hi && touch pwned",
    "echo hi || touch pwned",
    "echo hi; touch pwned",
    "echo hi ; touch pwned",
    "echo hi & touch pwned",
    "echo hi &",
    "echo hi | sh",
    "echo hi > pwned",
    "echo hi >> pwned",
    "echo hi < /etc/passwd",
    "echo hi $(touch pwned)",
    "echo hi ${HOME}",
    "echo hi `touch pwned`",
    "echo hi\ntouch pwned",
    "echo hi\rtouch pwned",
    "echo hi (touch pwned)",
    "echo hi \\; touch pwned",
    "echo hi '; touch pwned'",  # quoted, still refused: the pinned rule is "anywhere"
    "echo hi 'unbalanced",
]


@pytest.mark.parametrize("command", CHAINED)
async def test_an_allowlisted_command_chained_with_shell_syntax_asks(tmp_path, command):
    editor = AskingEditor("reject_once")
    gate = _gate(tmp_path, editor, permission_mode="ask", command_allowlist=["echo hi"])
    with pytest.raises(ToolError, match="the user rejected this"):
        await gate.ensure(_ctx(tmp_path), PermissionRequest("command", command, "Run it"))
    assert editor.asked == ["Run it"]


@pytest.mark.parametrize(
    ("command", "allowed"),
    [("echo hi", True), ("echo hi there", True), ("  echo   hi  ", True), ("echo hiya", False),
     ("echo", False), ("echo 'hi there'", False), ("", False)],
)
async def test_the_gate_allows_only_the_entry_s_own_words_without_asking(
    tmp_path, command, allowed
):
    editor = AskingEditor("reject_once")
    gate = _gate(tmp_path, editor, permission_mode="ask", command_allowlist=["echo hi"])
    request = PermissionRequest("command", command, "Run it")
    if allowed:
        await gate.ensure(_ctx(tmp_path), request)
    else:
        with pytest.raises(ToolError, match="the user rejected this"):
            await gate.ensure(_ctx(tmp_path), request)
    assert editor.asked == ([] if allowed else ["Run it"])


async def test_a_chained_allowlisted_command_sends_a_permission_request_and_runs_nothing(paths):
    chained = tool_calls(call("run_command", {"command": "echo hi && touch pwned"}))
    async with scripted_agent(
        paths, chained, permission_mode="ask", command_allowlist=["echo hi"]
    ) as (server, ed, _):
        ed.client.permission_answers = ["reject_once"]
        sid = await open_session(ed, paths)
        assert await prompt(ed, sid, "Run it.") == "end_turn"
    [(asked_sid, tool_call, _)] = ed.client.permission_requests
    assert (asked_sid, tool_call.raw_input) == (sid, {"command": "echo hi && touch pwned"})
    assert not (paths.cwd / "pwned").exists()
    assert "the user rejected this" in tool_results(server)[0]


async def test_commands_off_the_allowlist_ask_even_in_accept_edits(tmp_path):
    editor = AskingEditor("allow_once")
    gate = _gate(tmp_path, editor, permission_mode="accept_edits", command_allowlist=["ls"])
    await gate.ensure(_ctx(tmp_path), PermissionRequest("command", "ls -la", "Run ls -la"))
    await gate.ensure(_ctx(tmp_path), PermissionRequest("command", "rm x", "Run rm x"))
    assert editor.asked == ["Run rm x"]


async def test_allow_always_on_a_command_remembers_that_exact_command(tmp_path):
    editor = AskingEditor("allow_always", "allow_once")
    gate = _gate(tmp_path, editor, permission_mode="ask")
    for command in ("make test", "make test", "make test --all"):
        await gate.ensure(_ctx(tmp_path), PermissionRequest("command", command, f"Run {command}"))
    assert editor.asked == ["Run make test", "Run make test --all"]
    saved = json.loads((tmp_path / GRANTS_FILE).read_text())
    assert saved["commands"] == {"make test": "allow"}


async def test_with_no_editor_a_gate_refuses_and_names_the_setting(tmp_path):
    gate = _gate(tmp_path, None, permission_mode="ask")
    with pytest.raises(ToolError, match=r"tools\.permission_mode is 'ask'"):
        await gate.ensure(_ctx(tmp_path), PermissionRequest("write", str(tmp_path / "a"), "W"))


async def test_a_damaged_grants_file_is_ignored_and_never_written_over(tmp_path):
    (tmp_path / GRANTS_FILE).write_text("{not json")
    editor = AskingEditor("allow_always", "allow_always")
    gate = _gate(tmp_path, editor, permission_mode="ask")
    request = PermissionRequest("command", "make", "Run make")
    await gate.ensure(_ctx(tmp_path), request)
    await gate.ensure(_ctx(tmp_path), request)
    assert len(editor.asked) == 2
    assert (tmp_path / GRANTS_FILE).read_text() == "{not json"


async def test_the_nearest_remembered_folder_decides_for_a_path_outside(tmp_path):
    etc = tmp_path / "etc"
    folders = {str(etc): "allow", str(etc / "ssl"): "reject"}
    (tmp_path / GRANTS_FILE).write_text(json.dumps({"version": 1, "folders": folders}))
    editor = AskingEditor()  # any question would fail the test: nothing is left to answer
    gate = _gate(tmp_path, editor, permission_mode="ask")
    cwd = tmp_path / "project"
    await gate.ensure(_ctx(cwd), PermissionRequest("outside", str(etc / "hosts"), "Read hosts"))
    with pytest.raises(ToolError, match="always reject"):
        await gate.ensure(
            _ctx(cwd), PermissionRequest("outside", str(etc / "ssl" / "key.pem"), "Read key")
        )
    assert editor.asked == []
