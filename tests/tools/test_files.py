"""read_file never stalls the event loop and never reads more than it returns."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import anyio
import pytest

from acp_memory.tools import files
from acp_memory.tools.base import ToolContext, ToolError
from acp_memory.tools.files import ReadFile

pytestmark = pytest.mark.anyio


def _ctx(cwd: Path) -> ToolContext:
    return ToolContext("sess_x", cwd, "agent")


async def test_a_fifo_with_no_writer_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with anyio.fail_after(5), pytest.raises(ToolError, match="not a regular file"):
        await ReadFile().run({"path": "pipe"}, _ctx(tmp_path))


async def test_a_folder_is_refused_with_a_hint(tmp_path):
    (tmp_path / "sub").mkdir()
    with pytest.raises(ToolError, match="is a folder"):
        await ReadFile().run({"path": "sub"}, _ctx(tmp_path))


async def test_a_huge_file_is_judged_without_being_read_whole(tmp_path):
    # A sparse terabyte: reading it whole would exhaust memory long before it was refused.
    with (tmp_path / "huge.log").open("wb") as f:
        f.write(b"first line\n")
        f.truncate(1 << 40)
    with anyio.fail_after(5), pytest.raises(ToolError, match="binary file"):
        await ReadFile().run({"path": "huge.log"}, _ctx(tmp_path))


async def test_a_long_text_file_is_cut_with_a_marker(tmp_path):
    (tmp_path / "long.txt").write_text("x" + "é" * 200_000)  # the cut splits an é in two
    result = await ReadFile().run({"path": "long.txt"}, _ctx(tmp_path))
    assert result.text.startswith("xé")
    assert result.text.endswith("\n[truncated at 262144 bytes]")
    assert len(result.text.encode()) < 262144 + 40


async def test_the_event_loop_keeps_running_while_a_file_is_read(tmp_path, monkeypatch):
    # A read that blocks (a slow disk, a network mount) happens in a worker thread.
    (tmp_path / "a.txt").write_text("slow")
    entered, release = anyio.Event(), threading.Event()
    real = files.read_head

    def slow_read(*args: object) -> bytes:
        anyio.from_thread.run_sync(entered.set)
        release.wait(10)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(files, "read_head", slow_read)
    async with anyio.create_task_group() as tg:
        result: list[str] = []

        async def read() -> None:
            result.append((await ReadFile().run({"path": "a.txt"}, _ctx(tmp_path))).text)

        tg.start_soon(read)
        with anyio.fail_after(5):
            await entered.wait()  # the loop runs this while the read is blocked
        release.set()
    assert result == ["slow"]
