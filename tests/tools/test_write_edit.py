"""write_file and edit_file driven by a model through the agent: what they change, the diff the
editor sees, the bad input the model reads back as a tool error while the turn goes on, and the
editor's buffers (fs/*) versus the local disk."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from fakes.script import call, tool_calls
from filetools_kit import (
    diffs,
    finished_calls,
    open_session,
    prompt,
    scripted_agent,
    tool_results,
)
from harness import in_process_agent

from acp_memory.tools.base import Diff, PermissionRequest, ToolContext, ToolError
from acp_memory.tools.edit import EditFile, WriteFile

pytestmark = pytest.mark.anyio


async def test_write_file_creates_the_file_and_its_folders_and_shows_a_new_file_diff(paths):
    reply = tool_calls(call("write_file", {"path": "docs/new/a.md", "content": "# A\n"}))
    async with scripted_agent(paths, reply) as (server, ed, _):
        sid = await open_session(ed, paths)
        assert await prompt(ed, sid, "Write it.") == "end_turn"
        update = finished_calls(ed, sid)[0]
    target = paths.cwd / "docs" / "new" / "a.md"
    assert target.read_text() == "# A\n"
    assert update.status == "completed"
    [diff] = diffs(update)
    assert (diff.path, diff.old_text, diff.new_text) == (str(target), None, "# A\n")
    assert tool_results(server) == ["Created docs/new/a.md (4 characters)."]


async def test_write_file_replaces_a_file_and_the_diff_keeps_the_old_text(paths):
    (paths.cwd / "a.txt").write_text("old\n")
    reply = tool_calls(call("write_file", {"path": "a.txt", "content": "new\n"}))
    async with scripted_agent(paths, reply) as (_, ed, _):
        sid = await open_session(ed, paths)
        await prompt(ed, sid, "Rewrite it.")
        [diff] = diffs(finished_calls(ed, sid)[0])
    assert (paths.cwd / "a.txt").read_text() == "new\n"
    assert (diff.old_text, diff.new_text) == ("old\n", "new\n")


async def test_edit_file_replaces_the_one_match_and_replays_its_diff_after_load(cfg, paths):
    source = paths.cwd / "app.py"
    source.write_text("def f():\n    return 1\n")
    edit = {"path": "app.py", "old_text": "return 1", "new_text": "return 2"}
    async with scripted_agent(paths, tool_calls(call("edit_file", edit))) as (server, ed, _):
        sid = await open_session(ed, paths)
        await prompt(ed, sid, "Edit it.")
        [live] = diffs(finished_calls(ed, sid)[0])
    assert source.read_text() == "def f():\n    return 2\n"
    assert (live.old_text, live.new_text) == ("def f():\n    return 1\n", source.read_text())
    assert tool_results(server) == ["Edited app.py: replaced 1 occurrence."]
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
        [replayed] = diffs(finished_calls(ed, sid)[0])
    assert replayed == live


async def test_edit_file_with_replace_all_replaces_every_match(paths):
    (paths.cwd / "a.txt").write_text("x = 1\ny = 1\n")
    edit = {"path": "a.txt", "old_text": "1", "new_text": "2", "replace_all": True}
    async with scripted_agent(paths, tool_calls(call("edit_file", edit))) as (server, ed, _):
        await prompt(ed, await open_session(ed, paths), "Edit all.")
    assert (paths.cwd / "a.txt").read_text() == "x = 2\ny = 2\n"
    assert tool_results(server) == ["Edited a.txt: replaced 2 occurrences."]


async def test_edit_file_keeps_the_permission_bits_of_the_file(paths):
    script = paths.cwd / "run.sh"
    script.write_text("#!/bin/sh\necho one\n")
    script.chmod(0o751)
    edit = {"path": "run.sh", "old_text": "one", "new_text": "two"}
    async with scripted_agent(paths, tool_calls(call("edit_file", edit))) as (_, ed, _):
        await prompt(ed, await open_session(ed, paths), "Edit.")
    assert script.read_text() == "#!/bin/sh\necho two\n"
    assert stat.S_IMODE(os.stat(script).st_mode) == 0o751


@pytest.mark.parametrize(
    ("tool", "args", "words"),
    [
        ("edit_file", {"old_text": "nowhere", "new_text": "x"}, "not found in a.txt (0 matches)"),
        ("edit_file", {"old_text": "same", "new_text": "x"}, "occurs 2 times in a.txt"),
        ("edit_file", {"old_text": "", "new_text": "x"}, "old_text is empty"),
        ("edit_file", {"old_text": "same", "new_text": "same"}, "nothing to change"),
        ("edit_file", {"path": "gone.txt", "old_text": "a", "new_text": "b"}, "no such file"),
        ("edit_file", {"path": "sub", "old_text": "a", "new_text": "b"}, "edit sub: a folder"),
        ("edit_file", {"path": "blob.bin", "old_text": "a", "new_text": "b"}, "binary file"),
        ("edit_file", {"path": "latin1.txt", "old_text": "a", "new_text": "b"}, "not UTF-8"),
        ("write_file", {"path": "sub", "content": "x"}, "write sub: a folder"),
        ("write_file", {"path": "blob.bin", "content": "x"}, "binary file"),
        ("write_file", {"path": "a.txt/inner.txt", "content": "x"}, "cannot write"),
        ("write_file", {"path": "a\x00b", "content": "x"}, "not a usable path"),
        ("write_file", {"content": "a\x00b"}, "content has a NUL character"),
    ],
    ids=[
        "no-match",
        "two-matches",
        "empty-old-text",
        "no-change",
        "missing-file",
        "folder",
        "binary",
        "not-utf8",
        "write-over-folder",
        "write-over-binary",
        "parent-is-a-file",
        "nul-in-path",
        "nul-in-content",
    ],
)
async def test_bad_file_edits_are_tool_errors_and_the_turn_goes_on(paths, tool, args, words):
    (paths.cwd / "a.txt").write_text("same and same\n")
    (paths.cwd / "sub").mkdir()
    (paths.cwd / "blob.bin").write_bytes(b"\x89PNG\x00\x01a")
    (paths.cwd / "latin1.txt").write_bytes("caf\xe9 a".encode("latin-1"))
    before = {p.name: p.read_bytes() for p in paths.cwd.iterdir() if p.is_file()}
    async with scripted_agent(paths, tool_calls(call(tool, {"path": "a.txt", **args}))) as (
        server,
        ed,
        _,
    ):
        sid = await open_session(ed, paths)
        assert await prompt(ed, sid, "Try it.") == "end_turn"
        update = finished_calls(ed, sid)[0]
    [result] = tool_results(server)
    assert result.startswith("Error: ") and words in result
    assert update.status == "failed" and not diffs(update)
    assert {p.name: p.read_bytes() for p in paths.cwd.iterdir() if p.is_file()} == before
    assert len(server.requests) == 2  # the model read the error and answered


async def test_with_editor_fs_the_edit_reads_the_unsaved_buffer_and_writes_through_the_editor(
    paths,
):
    source = paths.cwd / "app.py"
    source.write_text("value = 1\n")  # what is saved on disk
    edit = {"path": "app.py", "old_text": "value = 2", "new_text": "value = 3"}
    replies = [
        tool_calls(call("read_file", {"path": "app.py"})),
        tool_calls(call("edit_file", edit)),
        tool_calls(call("write_file", {"path": "new.txt", "content": "fresh\n"})),
    ]
    async with scripted_agent(paths, *replies) as (server, ed, _):
        ed.client.buffers = {str(source): "value = 2\n"}  # the user's unsaved change
        sid = await open_session(ed, paths, fs=True)
        assert await prompt(ed, sid, "Edit the buffer.") == "end_turn"
        updates = finished_calls(ed, sid)
    read, edited, _ = tool_results(server)
    assert read == "value = 2\n"
    assert edited == "Edited app.py: replaced 1 occurrence."
    assert ed.client.buffers == {str(source): "value = 3\n", str(paths.cwd / "new.txt"): "fresh\n"}
    assert ("fs/write_text_file", str(source)) in ed.client.fs_calls
    # The editor saves, not the agent: the disk still has what the user saved.
    assert source.read_text() == "value = 1\n"
    assert not (paths.cwd / "new.txt").exists()
    [diff] = diffs(updates[1])
    assert (diff.old_text, diff.new_text) == ("value = 2\n", "value = 3\n")


async def test_without_editor_fs_the_tools_use_the_local_disk(paths):
    source = paths.cwd / "app.py"
    source.write_text("value = 1\n")
    edit = {"path": "app.py", "old_text": "value = 1", "new_text": "value = 3"}
    replies = [
        tool_calls(call("read_file", {"path": "app.py"})),
        tool_calls(call("edit_file", edit)),
    ]
    async with scripted_agent(paths, *replies) as (server, ed, _):
        ed.client.buffers = {str(source): "value = 2\n"}  # there, but never advertised
        sid = await open_session(ed, paths, fs=False)
        await prompt(ed, sid, "Edit the file.")
    assert tool_results(server)[0] == "value = 1\n"
    assert source.read_text() == "value = 3\n"
    assert ed.client.fs_calls == []


async def test_an_editor_error_is_a_tool_error_with_the_editors_words(paths):
    (paths.cwd / "a.txt").write_text("on disk, but the editor cannot open it\n")
    reply = tool_calls(call("read_file", {"path": "a.txt"}))
    async with scripted_agent(paths, reply) as (server, ed, _):
        ed.client.buffers = {}  # the editor answers fs/* and has no such buffer
        sid = await open_session(ed, paths, fs=True)
        assert await prompt(ed, sid, "Read.") == "end_turn"
    [result] = tool_results(server)
    assert result.startswith("Error: the editor refused fs/read_text_file: Resource not found")


class EditingWhileAsked:
    """A permission gate whose user changes the file while deciding, then allows."""

    def __init__(self, path: Path, text: str) -> None:
        self.path, self.text = path, text

    async def ensure(self, ctx: ToolContext, request: PermissionRequest) -> None:
        self.path.write_text(self.text)


async def test_an_edit_applies_to_the_file_as_it_is_once_the_user_has_allowed_it(tmp_path):
    source = tmp_path / "a.txt"
    source.write_text("one\ntwo\n")
    gate = EditingWhileAsked(source, "zero\none\ntwo\n")
    ctx = ToolContext("sess_x", tmp_path, "agent", permissions=gate)
    edit = {"path": "a.txt", "old_text": "two", "new_text": "three"}
    result = await EditFile().run(edit, ctx)
    assert source.read_text() == "zero\none\nthree\n"
    assert result.content == [Diff(str(source), "zero\none\ntwo\n", "zero\none\nthree\n")]


async def test_an_edit_the_user_made_impossible_while_deciding_is_refused(tmp_path):
    source = tmp_path / "a.txt"
    source.write_text("one\ntwo\n")
    gate = EditingWhileAsked(source, "two\ntwo\n")
    ctx = ToolContext("sess_x", tmp_path, "agent", permissions=gate)
    with pytest.raises(ToolError, match="occurs 2 times"):
        await EditFile().run({"path": "a.txt", "old_text": "two", "new_text": "3"}, ctx)
    assert source.read_text() == "two\ntwo\n"


class RecordingGate:
    """A permission gate that allows everything and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[PermissionRequest] = []

    async def ensure(self, ctx: ToolContext, request: PermissionRequest) -> None:
        self.asked.append(request)


async def test_the_user_is_never_asked_to_allow_an_edit_that_cannot_work(tmp_path):
    (tmp_path / "a.txt").write_text("one\n")
    gate = RecordingGate()
    ctx = ToolContext("sess_x", tmp_path, "agent", permissions=gate)
    with pytest.raises(ToolError, match="not found"):
        await EditFile().run({"path": "a.txt", "old_text": "two", "new_text": "3"}, ctx)
    assert gate.asked == []
    await EditFile().run({"path": "a.txt", "old_text": "one", "new_text": "1"}, ctx)
    target = str((tmp_path / "a.txt").resolve())
    assert gate.asked == [PermissionRequest("write", target, "Edit a.txt")]


async def test_a_write_with_no_permission_gate_is_refused_and_nothing_is_written(tmp_path):
    ctx = ToolContext("sess_x", tmp_path, "agent")
    with pytest.raises(ToolError, match="no permission gate to allow file writes"):
        await WriteFile().run({"path": "a.txt", "content": "x"}, ctx)
    assert not (tmp_path / "a.txt").exists()
