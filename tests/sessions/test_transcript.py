"""messages.json: cheap appends, a whole document at every instant, one writing process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from acp_memory.sessions import transcript as transcript_module
from acp_memory.sessions.lock import BundleBusy
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import BundleError, Session, SessionStore, load_bundle

pytestmark = pytest.mark.anyio

WRITER = Path(__file__).with_name("transcript_writer.py")
READER = Path(__file__).with_name("transcript_reader.py")


def _message(i: int, size: int = 40) -> TranscriptMessage:
    return TranscriptMessage(role="assistant" if i % 2 else "user", content=f"m{i} " + "x" * size)


def _stored(folder: Path) -> list[dict]:
    document = json.loads((folder / "messages.json").read_bytes())
    assert document["version"] == 1
    return document["messages"]


def _new(tmp_path: Path) -> Session:
    return SessionStore(tmp_path / "sessions").create(cwd=str(tmp_path), model_id="offline/default")


async def test_each_append_writes_the_new_message_not_the_whole_transcript(tmp_path, monkeypatch):
    session = _new(tmp_path)
    for i in range(1500):
        session.messages.append(_message(i, size=4000))  # a 6 MB history, as if loaded
    await session.append(_message(1500))
    await session.append(_message(1501))  # the first two after a load are written whole
    written: list[int] = []
    real_pwrite = os.pwrite

    def counting_pwrite(fd: int, data: bytes, offset: int) -> int:
        written.append(len(data))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(transcript_module.os, "pwrite", counting_pwrite)
    monkeypatch.setattr(transcript_module, "write_atomic", None)  # no whole rewrite either
    new = _message(1502, size=100)
    await session.append(new)
    await session.append(_message(1503, size=100))
    # The spare lags one message, so an append writes at most two messages and the closing.
    assert 0 < sum(written) < 2 * (len(new.model_dump_json()) + 64)
    stored = _stored(session.dir)
    assert len(stored) == 1504 and stored[-1]["content"].startswith("m1503 ")


async def test_each_message_is_scrubbed_once_though_both_files_get_it(tmp_path):
    """A memory run's child scrubs (redacts) every message it writes; the spare holds each
    message too, but a message is encoded, and so scrubbed, only once."""
    scrubbed: list[str] = []

    def scrub(data: dict) -> dict:
        if "role" in data:  # a message (session.json goes through it too)
            scrubbed.append(data["content"])
        return data

    session = SessionStore(tmp_path / "sessions").create(
        cwd=str(tmp_path), model_id="offline/default", durable=False, scrub=scrub
    )
    for i in range(5):
        await session.append(_message(i))
    assert scrubbed == [m.content for m in session.messages]
    assert [m["content"] for m in _stored(session.dir)] == scrubbed


async def test_another_process_always_reads_a_whole_transcript_of_the_first_messages(tmp_path):
    session = _new(tmp_path)
    stop = tmp_path / "stop"
    command = [sys.executable, str(READER), str(session.dir), str(stop)]
    async with await anyio.open_process(command, stderr=None) as reader:
        try:
            for i in range(150):
                await session.append(_message(i, size=i * 37 % 3000))
        finally:
            stop.touch()
        assert reader.stdout is not None
        with anyio.fail_after(30):
            out = b"".join([chunk async for chunk in reader.stdout]).decode()
            await reader.wait()
    assert out.startswith("ok "), out
    assert [m["content"].split()[0] for m in _stored(session.dir)] == [f"m{i}" for i in range(150)]


def _torn_reads(monkeypatch, messages_path: Path, torn: int) -> list[int]:
    """The first `torn` reads of messages.json get what a reader outpaced by an append gets:
    the old file's bytes with a new message written half over its closing bracket."""
    real = Path.read_bytes
    reads: list[int] = []

    def read_bytes(path: Path) -> bytes:
        data = real(path)
        if path != messages_path:
            return data
        reads.append(len(data))
        if len(reads) > torn:
            return data
        end = data.rindex(b"\n]}")
        return data[:end] + b',\n{"role":"us' + data[end + 12 :]

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    return reads


async def test_a_torn_read_of_the_transcript_is_read_again(tmp_path, monkeypatch):
    session = _new(tmp_path)
    for i in range(3):
        await session.append(_message(i))
    session.close()
    reads = _torn_reads(monkeypatch, session.dir / "messages.json", torn=2)
    loaded = load_bundle(session.dir)
    assert [m.content.split()[0] for m in loaded.messages] == ["m0", "m1", "m2"]
    assert len(reads) == 3


async def test_a_transcript_that_never_parses_is_a_bundle_error(tmp_path, monkeypatch):
    session = _new(tmp_path)
    await session.append(_message(0))
    session.close()
    reads = _torn_reads(monkeypatch, session.dir / "messages.json", torn=100)
    with pytest.raises(BundleError, match=r"messages\.json: not valid JSON"):
        load_bundle(session.dir)
    assert len(reads) == transcript_module.READ_ATTEMPTS


def test_a_writer_killed_at_any_moment_leaves_a_whole_transcript(tmp_path):
    # Messages of several pages each, so a kill can land in the middle of a write.
    for round_ in range(4):
        folder = tmp_path / f"round{round_}"
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdout
        acknowledged = 0
        for _ in range(3 + round_ * 3):
            line = proc.stdout.readline()
            assert line, "the writer died on its own"
            acknowledged = int(line)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        bundle = next((folder / "sessions").iterdir())
        stored = _stored(bundle)
        assert len(stored) >= acknowledged
        assert [m["content"][:7] for m in stored] == [f"m{i:06d}" for i in range(len(stored))]


async def test_loading_a_bundle_writes_nothing(tmp_path):
    session = _new(tmp_path)
    for i in range(5):
        await session.append(_message(i))
    session.close()

    def snapshot() -> dict[str, tuple[int, int, int]]:
        return {
            str(p): (p.stat().st_ino, p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(session.dir.rglob("*"))
        }

    before = snapshot()
    again = load_bundle(session.dir)
    assert len(again.messages) == 5
    assert snapshot() == before


async def test_a_transcript_replaced_by_hand_between_appends_is_never_corrupted(tmp_path):
    session = _new(tmp_path)
    for i in range(4):
        await session.append(_message(i))
    # An editor saves a pretty-printed copy (a new file under the same name).
    path = session.dir / "messages.json"
    path.unlink()
    spare = json.loads((session.dir / ".messages.json.spare").read_text())
    path.write_text(json.dumps(spare, indent=4))
    for i in range(4, 8):
        await session.append(_message(i))
    assert [m["content"].split()[0] for m in _stored(session.dir)] == [f"m{i}" for i in range(8)]


async def test_a_second_writer_of_a_bundle_is_refused_then_builds_on_what_the_first_wrote(tmp_path):
    first = _new(tmp_path)
    await first.append(_message(0))
    second = load_bundle(first.dir)  # e.g. another acp-memory process loading the session
    await first.append(_message(1))
    with pytest.raises(BundleBusy, match="another acp-memory process"):
        await second.append(_message(99))
    assert len(_stored(first.dir)) == 2
    first.close()
    await second.append(_message(2))
    # The second writer reloaded the bundle first: the first writer's message is not lost.
    assert [m["content"].split()[0] for m in _stored(first.dir)] == ["m0", "m1", "m2"]
    assert [m.content.split()[0] for m in second.messages] == ["m0", "m1", "m2"]


async def test_a_message_is_recorded_even_when_the_turn_is_cancelled_meanwhile(tmp_path):
    session = _new(tmp_path)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await session.append(_message(0))
    assert [m["content"].split()[0] for m in _stored(session.dir)] == ["m0"]


async def test_a_bundle_made_for_its_prompt_is_titled_at_once_and_that_prompt_rewrites_nothing(
    tmp_path,
):
    prompt = "Recall the deploy day\nand the rest of the task"
    session = SessionStore(tmp_path / "sessions").create(
        cwd=str(tmp_path), model_id="offline/default", prompt=prompt
    )
    record = session.dir / "session.json"
    made = (record.stat().st_ino, record.read_bytes())
    assert json.loads(made[1])["title"] == "Recall the deploy day"
    await session.append(TranscriptMessage(role="user", content=prompt))
    await session.append(_message(1))
    assert (record.stat().st_ino, record.read_bytes()) == made  # the very file creation wrote
    assert _stored(session.dir)[0]["content"] == prompt
    # A later user message stamps session.json as any does.
    await session.append(_message(2))
    assert record.stat().st_ino != made[0]
    session.close()


async def test_an_append_unlinks_the_swap_name_only_when_a_killed_writer_left_it(
    tmp_path, monkeypatch
):
    session = _new(tmp_path)
    for i in range(3):
        await session.append(_message(i))
    swap = session.dir / ".messages.json.swap"
    unlinked: list[str] = []
    real_unlink = os.unlink

    def spying_unlink(path: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
        unlinked.append(Path(path).name)
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(transcript_module.os, "unlink", spying_unlink)
    await session.append(_message(3))
    assert swap.name not in unlinked and not swap.exists()  # a clean swap renames it away
    # A writer killed between its link and its renames leaves the swap name behind.
    os.link(session.dir / "messages.json", swap)
    await session.append(_message(4))
    await session.append(_message(5))
    assert unlinked.count(swap.name) == 1 and not swap.exists()
    assert [m["content"].split()[0] for m in _stored(session.dir)] == [f"m{i}" for i in range(6)]
    spare = json.loads((session.dir / ".messages.json.spare").read_text())["messages"]
    assert [m["content"].split()[0] for m in spare] == [f"m{i}" for i in range(5)]
