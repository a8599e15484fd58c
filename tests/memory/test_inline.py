"""Kodik's inline memory: the notes loaded into the system prompt at session/new, frozen for
the session, and the main agent's direct `memory` tool that saves and deletes them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from engine.turnkit import (
    fake_config,
    prompt,
    stored_messages,
    turn_agent,
    turn_context_text,
    updates_of,
)
from fakes.httpserver import Recorded
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from runtime.test_memory_run import MemoryRoutedOpenAI, memory_config

from acp_memory.config import Config, Paths
from acp_memory.config.models import MemoryConfig
from acp_memory.memory.direct import DirectMemoryTool
from acp_memory.memory.inline import MAX_LINES, MAX_NOTE_BYTES, MAX_NOTES, snapshot
from acp_memory.memory.roots import Roots
from acp_memory.tools.base import ToolContext
from acp_memory.tools.registry import ToolSet

pytestmark = pytest.mark.anyio

GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SIX = {"memory_delete", "memory_list", "memory_mkdir", "memory_read", "memory_save",
       "memory_search"}


def note(root: Path, rel: str, body: str, age: float = 0) -> Path:
    """Write a note whose modification time is `age` seconds in the past."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    when = 1_900_000_000 - age
    os.utime(path, (when, when))
    return path


def note_paths(block: str) -> list[str]:
    return [ln.split('"')[1] for ln in block.splitlines() if ln.startswith("<note path=")]


def scope_text(snap: str, scope: str) -> str:
    start = snap.index(f'<memory scope="{scope}">')
    return snap[start : snap.index("</memory>", start)]


def inline_config(base_url: str, **memory: Any) -> Config:
    cfg = fake_config(base_url)
    cfg.memory = MemoryConfig(inline=True, **memory)
    return cfg


def tools_of(request: Recorded) -> set[str]:
    return {t["function"]["name"] for t in (request.json or {}).get("tools", [])}


def system_of(request: Recorded) -> str:
    content: str = request.messages[0]["content"]
    return content


# -- the snapshot ------------------------------------------------------------------------------


def test_each_scope_is_a_memory_block_of_its_notes_newest_first(tmp_path: Path) -> None:
    roots = Roots(tmp_path / "home" / "memory", tmp_path / "project" / "memory")
    note(roots.project_root, "old.md", "Tests run with pytest -q.", age=300)
    note(roots.project_root, "arch/new.md", "The engine is in engine/turn.py.", age=10)
    note(roots.project_root, "mid.txt", "Use ruff.", age=100)
    note(roots.project_root, ".hidden.md", "never loaded", age=0)
    note(roots.project_root, "data.json", "{}", age=0)
    note(roots.global_root, "prefs.md", "Answer in English.\nBe brief.", age=50)

    snap = snapshot(roots)

    # Workspace (the project root) first, then global; each block closes.
    assert snap.startswith('<memory scope="workspace">\n')
    assert snap.index('<memory scope="global">') > snap.index("</memory>")
    assert snap.endswith("</memory>")
    workspace = scope_text(snap, "workspace")
    assert note_paths(workspace) == ["arch/new.md", "mid.txt", "old.md"]
    assert '<note path="arch/new.md">\nThe engine is in engine/turn.py.\n</note>' in workspace
    assert "never loaded" not in snap and "{}" not in snap
    assert note_paths(scope_text(snap, "global")) == ["prefs.md"]
    assert "Answer in English.\nBe brief.\n</note>" in snap


def test_a_scope_without_notes_says_so(tmp_path: Path) -> None:
    snap = snapshot(Roots(tmp_path / "none", tmp_path / "nothing"))
    assert snap == (
        '<memory scope="workspace">\n(no notes)\n</memory>\n\n'
        '<memory scope="global">\n(no notes)\n</memory>'
    )


def test_a_scope_loads_at_most_50_notes_and_the_cut_says_how_many_were_left(
    tmp_path: Path,
) -> None:
    roots = Roots(tmp_path / "g", tmp_path / "p")
    for n in range(MAX_NOTES + 3):
        note(roots.global_root, f"n{n:02}.md", f"fact {n}", age=n)

    block = scope_text(snapshot(roots), "global")

    assert note_paths(block) == [f"n{n:02}.md" for n in range(MAX_NOTES)]
    assert "fact 52" not in block and "fact 49" in block
    marker = "[3 more notes not loaded: at most 50 notes per scope]"
    assert block.rstrip().splitlines()[-1] == marker


def test_a_scope_loads_at_most_200_lines_and_the_note_that_crosses_is_cut(
    tmp_path: Path,
) -> None:
    roots = Roots(tmp_path / "g", tmp_path / "p")
    note(roots.project_root, "a.md", "\n".join(f"a{i}" for i in range(150)), age=1)
    note(roots.project_root, "b.md", "\n".join(f"b{i}" for i in range(100)), age=2)
    note(roots.project_root, "c.md", "c0", age=3)
    note(roots.project_root, "d.md", "d0", age=4)

    block = scope_text(snapshot(roots), "workspace")

    body = [ln for ln in block.splitlines()[1:] if not ln.startswith(("<", "["))]
    assert len(body) == MAX_LINES
    assert "b49" in body and "b50" not in body
    assert "[note cut after 50 of its 100 lines: at most 200 lines of notes per scope; " \
        "2 more notes not loaded]" in block
    assert "c0" not in block and note_paths(block) == ["a.md", "b.md"]


def test_notes_after_exactly_200_lines_are_left_out_with_a_marker(tmp_path: Path) -> None:
    roots = Roots(tmp_path / "g", tmp_path / "p")
    note(roots.global_root, "full.md", "\n".join("x" * MAX_LINES), age=1)
    note(roots.global_root, "late.md", "late", age=2)

    block = scope_text(snapshot(roots), "global")

    assert note_paths(block) == ["full.md"] and "late" not in block.split("[")[0]
    assert "[1 more note not loaded: at most 200 lines of notes per scope]" in block


def test_a_note_over_16_kb_is_cut_on_a_character_boundary_with_a_marker(
    tmp_path: Path,
) -> None:
    roots = Roots(tmp_path / "g", tmp_path / "p")
    big = "€" * 7_000  # 21,000 bytes of UTF-8 on one line: the line bound is not what cuts
    note(roots.global_root, "big.md", big)

    block = scope_text(snapshot(roots), "global")

    kept = block.splitlines()[2]
    # 16384 bytes would split the 5462nd sign: the cut keeps 5461 whole ones.
    assert kept == "€" * 5461 and len(kept.encode()) == MAX_NOTE_BYTES - 1
    assert "[note cut at 16 KB: its whole text is 21000 bytes]" in block


def test_a_folder_symlinked_back_into_its_scope_is_walked_once(tmp_path: Path) -> None:
    roots = Roots(tmp_path / "g", tmp_path / "p")
    note(roots.global_root, "top.md", "top", age=1)
    note(roots.global_root, "sub/inner.md", "inner", age=2)
    (roots.global_root / "sub" / "again").symlink_to(roots.global_root)

    block = scope_text(snapshot(roots), "global")

    assert note_paths(block) == ["top.md", "sub/inner.md"]


# -- in the session --------------------------------------------------------------------------


async def test_the_snapshot_heads_the_system_message_and_never_the_turn_context(paths):
    project_root = paths.cwd / "memory"
    note(project_root, "conventions.md", "Tabs, never spaces.")
    note(paths.home / "memory", "me.md", "Call me Ana.")
    async with FakeOpenAI(default=text("ok")) as server:
        async with turn_agent(inline_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await prompt(ed, sid, "hi")
        (request,) = server.requests
    system = system_of(request)
    assert system.startswith('<memory scope="workspace">\n<note path="conventions.md">\n')
    assert "Call me Ana." in scope_text(system, "global")
    assert "a coding agent" in system.split("</memory>")[-1]  # the template follows
    tail = turn_context_text(request)
    assert "## Current time (UTC)" in tail
    assert "Tabs, never spaces." not in tail and "<memory" not in tail
    record = json.loads((paths.sessions_dir / sid / "session.json").read_text())
    assert record["inlineMemory"].endswith('Call me Ana.\n</note>\n</memory>')
    assert system.startswith(record["inlineMemory"] + "\n\n")
    assert not any("<memory scope=" in m["content"] for m in stored_messages(paths, sid))


async def test_without_inline_there_is_no_snapshot_and_no_memory_tool(paths):
    note(paths.cwd / "memory", "conventions.md", "Tabs, never spaces.")
    async with FakeOpenAI(default=text("ok")) as server:
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await prompt(ed, sid, "hi")
        (request,) = server.requests
    assert "<memory scope=" not in system_of(request)
    assert "memory" not in tools_of(request)
    assert "inlineMemory" not in json.loads((paths.sessions_dir / sid / "session.json").read_text())


async def test_the_snapshot_is_frozen_across_a_save_and_a_session_load(paths):
    root = paths.cwd / "memory"
    note(root, "conventions.md", "Tabs, never spaces.")
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("memory", {"scope": "workspace", "path": "db",
                                       "content": "The database is Postgres 16."})),
            text("Saved."),
            text("Second turn."),
            text("In the new session."),
            text("After load."),
        )
        cfg = inline_config(server.base_url)
        assert not cfg.memory.enable  # inline memory alone, no memory subagent
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "remember the database") == "end_turn"
            (root / "conventions.md").write_text("Spaces now.")  # a hand edit
            await prompt(ed, sid, "next")
            fresh = await ed.start_session(paths.cwd)
            await prompt(ed, fresh, "what do you know?")
        async with turn_agent(cfg, paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
            await prompt(ed, sid, "back again")
        requests = server.requests

    assert (root / "db.md").read_text() == "The database is Postgres 16."
    first, after_tool, second_turn, new_session, after_load = (system_of(r) for r in requests)
    # One session, one system message: the save and the hand edit wait for the next session,
    # and session/load keeps the snapshot it was created with.
    assert first == after_tool == second_turn == after_load
    assert "Postgres" not in first and "Tabs, never spaces." in first
    assert "The database is Postgres 16." in new_session and "Spaces now." in new_session


async def test_inline_memory_works_beside_the_memory_subagent(paths):
    note(paths.home / "memory", "me.md", "Call me Ana.")
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("Already on disk:\n- The user is Ana.")]
        server.script(text("Hello Ana."))
        async with turn_agent(memory_config(server, inline=True), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "who am I?") == "end_turn"
        (child,) = server.child_requests
        (parent,) = server.parent_requests
    assert "Call me Ana." in system_of(parent)
    assert "The user is Ana." in turn_context_text(parent)
    assert "memory" in tools_of(parent) and not tools_of(parent) & SIX
    # The memory child gets neither the snapshot nor the direct tool.
    assert "<memory scope=" not in system_of(child) and tools_of(child) == SIX


async def test_the_memory_tool_is_offered_in_agent_mode_only_and_never_to_children(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "Look around."})),
            text("Child done."),  # the child
            text("Parent done."),
            text("plan answer"),
            text("ask answer"),
        )
        async with turn_agent(inline_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await prompt(ed, sid, "delegate")
            for mode in ("plan", "ask"):
                await ed.conn.set_session_mode(session_id=sid, mode_id=mode)
                await prompt(ed, sid, f"in {mode}")
        parent, child, parent_again, plan, ask = server.requests
    assert "memory" in tools_of(parent) and "memory" in tools_of(parent_again)
    assert next(m["content"] for m in child.messages if m["role"] == "user") == "Look around."
    assert "memory" not in tools_of(child) and "read_file" in tools_of(child)
    assert "<memory scope=" not in system_of(child)
    assert "memory" not in tools_of(plan) and "memory" not in tools_of(ask)
    # The mode's system message still opens with the session's snapshot.
    assert system_of(plan).startswith('<memory scope="workspace">')


async def test_a_child_asking_for_the_memory_tool_by_name_cannot_call_it(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "Save it.", "tools": ["memory"]})),
            tool_calls(call("memory", {"scope": "global", "path": "x", "content": "y"})),
            text("Could not."),  # the child
            text("Parent done."),
        )
        async with turn_agent(inline_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await prompt(ed, sid, "delegate")
        child_first, child_second = server.requests[1:3]
    assert "memory" not in tools_of(child_first)
    result = [m for m in child_second.messages if m["role"] == "tool"][-1]["content"]
    assert result.startswith("Error: there is no tool named 'memory'")
    assert not (paths.home / "memory" / "x.md").exists()


# -- the memory tool -------------------------------------------------------------------------


@pytest.fixture
def run_tool(paths: Paths):
    cfg = Config(memory=MemoryConfig(inline=True, max_note_bytes=1000))
    tools = ToolSet([DirectMemoryTool(cfg, paths)])
    ctx = ToolContext("sess_" + "0" * 24, paths.cwd, "agent")

    async def run(**args: Any) -> tuple[str, bool]:
        result = await tools.execute("memory", json.dumps(args), ctx)
        return result.text, result.is_error

    return run


async def test_the_tool_saves_a_named_note_in_each_scope_and_says_created_or_updated(
    paths, run_tool
):
    out, err = await run_tool(scope="workspace", path="testing", content="Run pytest -q.")
    assert not err and out == "saved new note workspace:testing.md (14 bytes)."
    assert (paths.cwd / "memory" / "testing.md").read_text() == "Run pytest -q."
    out, err = await run_tool(scope="workspace", path="testing.md", content="Run pytest.")
    assert not err and out.startswith("updated workspace:testing.md: replaced the existing note")
    out, err = await run_tool(scope="global", path="todo.txt", content="Buy milk.")
    assert not err and (paths.home / "memory" / "todo.txt").read_text() == "Buy milk."


async def test_the_tool_takes_project_for_workspace_and_answers_workspace(paths, run_tool):
    out, err = await run_tool(scope="project", path="testing", content="Run pytest -q.")
    assert not err and out == "saved new note workspace:testing.md (14 bytes)."
    assert (paths.cwd / "memory" / "testing.md").read_text() == "Run pytest -q."
    out, err = await run_tool(scope="project", path="testing", delete="true")
    assert not err and out == "deleted note workspace:testing.md."


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("notes/a.md", "names a folder"),
        ("/etc/passwd", "is an absolute path"),
        ("~/x.md", "is an absolute path"),
        ("..", "contains '..'"),
        ("../escape", "contains '..'"),
        ("a\\b.md", "names a folder"),
        ("C:\\x.md", "is an absolute path"),
        ("  ", "path is empty"),
        (".hidden", "hidden entry"),
    ],
)
async def test_the_path_must_be_a_bare_file_name(paths, run_tool, path: str, why: str):
    out, err = await run_tool(scope="global", path=path, content="x")
    assert err and out.startswith("Error: ") and why in out
    assert not (paths.home / "memory").exists() or not any((paths.home / "memory").iterdir())


async def test_content_and_delete_together_or_neither_are_refused(paths, run_tool):
    out, err = await run_tool(scope="global", path="a", content="x", delete="true")
    assert err and "not both" in out
    out, err = await run_tool(scope="global", path="a")
    assert err and "give content to save the note" in out
    out, err = await run_tool(scope="global", path="a", delete="yes")
    assert err and "delete" in out
    assert "delete: 'yes' is not one of" in out  # refused by the schema, before the call
    assert not (paths.home / "memory" / "a.md").exists()


@pytest.mark.parametrize("flag", ["true", True])
async def test_delete_true_removes_the_note(paths, run_tool, flag: Any):
    await run_tool(scope="workspace", path="gone", content="bye")
    out, err = await run_tool(scope="workspace", path="gone", delete=flag)
    assert not err and out == "deleted note workspace:gone.md."
    assert not (paths.cwd / "memory" / "gone.md").exists()
    out, err = await run_tool(scope="workspace", path="gone", delete=flag)
    assert err and "no note or folder at workspace:gone.md" in out


async def test_a_secret_is_stripped_before_writing_and_the_result_says_so(paths, run_tool):
    out, err = await run_tool(scope="global", path="creds", content=f"token {GH}\n")
    on_disk = (paths.home / "memory" / "creds.md").read_text()
    assert not err and GH not in on_disk and "[REDACTED:github_token]" in on_disk
    assert "Removed 1 secret before writing (github_token x1)" in out


async def test_a_note_over_the_size_limit_is_refused_and_nothing_is_written(paths, run_tool):
    await run_tool(scope="global", path="big", content="small")
    out, err = await run_tool(scope="global", path="big", content="x" * 1001)
    assert err and "over the limit of 1000 bytes; nothing was written" in out
    assert (paths.home / "memory" / "big.md").read_text() == "small"


def test_the_title_names_the_operation_and_the_note(paths):
    tool = DirectMemoryTool(Config(memory=MemoryConfig(inline=True)), paths)
    assert tool.title({"scope": "global", "path": "me", "delete": "true"}) == (
        "Memory delete global:me.md"
    )
    # A path the call will refuse is shown as it was asked.
    assert tool.title({"scope": "workspace", "path": "a/b", "content": "x"}) == (
        "Memory save workspace:a/b"
    )


async def test_the_editor_is_shown_the_note_file_the_call_will_write(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("memory", {"scope": "global", "path": "me", "content": "Ana"})),
            text("ok"),
        )
        async with turn_agent(inline_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "save") == "end_turn"
            (row,) = updates_of(ed, sid, "tool_call")
            (done,) = updates_of(ed, sid, "tool_call_update")
    assert row.title == "Memory save global:me.md"
    assert [loc.path for loc in row.locations] == [str(paths.home / "memory" / "me.md")]
    # Written without a permission question (this client would refuse one): it is memory,
    # not the workspace.
    assert done.status == "completed" and not ed.client.permission_requests
    assert (paths.home / "memory" / "me.md").read_text() == "Ana"
