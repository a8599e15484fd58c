"""How output reads for a model (escapes, redraws, bounds) and how a log keeps it."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from acp_memory.memory.redact import RedactedStream
from acp_memory.tasks import log as task_log
from acp_memory.tasks.log import TaskLog, clean_output, clip, last_lines

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[1;32mok\x1b[0m", "ok"),
        ("\x1b]0;window title\x07text", "text"),
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x1b[2K\x1b[1Gline", "line"),
        ("10%\r50%\r100%\nnext", "100%\nnext"),
        ("abc\rde", "dec"),  # a shorter redraw leaves the end of the longer line
        ("done\r\nnext\r\n", "done\nnext\n"),  # CRLF is a line end, not a redraw
        ("tab\tkept", "tab\tkept"),
    ],
)
def test_clean_output_shows_what_a_terminal_would(raw: str, shown: str):
    assert clean_output(raw) == shown


def test_clip_keeps_head_and_tail_and_says_how_much_went():
    text = "".join(f"line {n}\n" for n in range(10_000))
    out = clip(text, 2000)
    assert len(out) <= 2000
    assert out.startswith("line 0\n") and out.rstrip().endswith("line 9999")
    assert "characters cut]" in out
    assert clip("short", 2000) == "short"


def test_last_lines_counts_lines_and_still_fits_the_limit():
    text = "\n".join(str(n) for n in range(100))
    assert last_lines(text, 3, 1000) == "[97 earlier lines not shown]\n97\n98\n99"
    long = "\n".join("x" * 500 for _ in range(10))
    out = last_lines(long, 10, 1000)
    assert len(out) <= 1000 and out.startswith("[output truncated: ")


async def test_a_log_in_memory_moves_to_its_file_when_attached(tmp_path: Path):
    log = TaskLog(1 << 20)
    await log.write(b"before\n")
    path = tmp_path / "t" / "output.log"
    await log.attach(path)
    await log.write("after\n")
    await log.close()
    assert path.read_bytes() == b"before\nafter\n"
    assert await log.read_tail(6) == b"after\n"
    assert log.total == 13 and not log.truncated


async def test_output_written_while_the_file_is_being_made_is_not_lost(
    tmp_path: Path, monkeypatch
):
    entered, proceed = threading.Event(), threading.Event()
    real = task_log._write_new

    def slow_write_new(path: Path, data: bytes) -> None:
        entered.set()
        proceed.wait(10)
        real(path, data)

    monkeypatch.setattr(task_log, "_write_new", slow_write_new)
    log = TaskLog(1 << 20)
    await log.write(b"before\n")
    path = tmp_path / "output.log"
    async with anyio.create_task_group() as tg:
        tg.start_soon(log.attach, path)
        await anyio.to_thread.run_sync(entered.wait, 10)
        await log.write(b"during\n")  # the command goes on writing meanwhile
        proceed.set()
    await log.write(b"after\n")
    assert path.read_bytes() == b"before\nduring\nafter\n"


class _RecordingFilter(RedactedStream):
    """The memory run's filter, recording what it is fed."""

    def __init__(self) -> None:
        super().__init__()
        self.fed: list[str] = []

    def feed(self, text: str) -> str:
        self.fed.append(text)
        return super().feed(text)


async def test_a_filtered_log_feeds_its_filter_a_line_at_a_time_and_keeps_the_same_text(
    tmp_path: Path,
):
    pieces = ["Already ", "on ", "disk:", "\n- tea ", "AKIAIOSFODNN7", "EXAMPLE\n", "tail"]
    one_by_one = RedactedStream()  # what feeding each piece gives
    expected = "".join(one_by_one.feed(p) for p in pieces) + one_by_one.flush()
    text_filter = _RecordingFilter()
    log = TaskLog(1 << 20, text_filter, inline=True)
    await log.attach(tmp_path / "output.log")
    for piece in pieces:
        await log.write(piece)
    assert text_filter.fed == ["Already on disk:\n- tea ", "AKIAIOSFODNN7EXAMPLE\n"]
    assert (await log.read_tail(100)).decode() == expected.removesuffix("tail")
    await log.close()
    assert (tmp_path / "output.log").read_text() == expected
    assert "AKIAIOSFODNN7EXAMPLE" not in expected and expected.endswith("\ntail")
