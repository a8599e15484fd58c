"""Real processes: concurrent saves lose nothing, and SIGKILL never leaves a partial note."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from tests.memory.writer_child import is_whole

CHILD = Path(__file__).with_name("writer_child.py")
REPO = Path(__file__).resolve().parents[2]


def spawn(
    root: Path, cache: Path, writer: int, count: int, names: int, *mode: str
) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(root), str(cache), str(writer), str(count), str(names),
         *mode],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def visible_notes(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.md") if not any(s.startswith(".") for s in p.parts[-2:])]


def test_two_processes_incrementing_the_same_notes_500_times_each_lose_no_update(
    tmp_path: Path,
) -> None:
    # Both writers read-modify-write the same three notes: without the root's lock, one
    # writer's check that the note is unchanged and the other's rename interleave, and an
    # increment is lost.
    root = tmp_path / "memory"
    procs = [spawn(root, tmp_path / "cache", w, 500, 3, "increment") for w in (1, 2)]
    for proc in procs:  # both are ready: start them together
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    counters = {note.name: int(note.read_text()) for note in visible_notes(root)}
    assert counters == {"n0.md": 2 * 167, "n1.md": 2 * 167, "n2.md": 2 * 166}


def test_sigkill_during_saves_leaves_no_partial_or_empty_note(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    rng = random.Random(1234)
    for round_ in range(6):
        proc = spawn(root, tmp_path / "cache", round_, 10_000, 7)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        for _ in range(rng.randint(1, 40)):  # kill at a random point in the stream of saves
            assert proc.stdout.readline().startswith("saved")
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        proc.stdout.close()
        proc.stdin.close()
        notes = visible_notes(root)
        assert notes, "the child saved before it was killed"
        for note in notes:
            text = note.read_text()
            assert text and is_whole(text), f"{note} is partial after SIGKILL"


def test_concurrent_writers_to_one_note_leave_one_whole_version(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    procs = [spawn(root, tmp_path / "cache", w, 100, 1) for w in (1, 2)]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    (note,) = visible_notes(root)
    assert is_whole(note.read_text())
