"""`acp-memory demo`: the memory story on the offline model, in a home it keeps and names."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from acp_memory.demo import describe_memory_run

TIMEOUT = 120  # seconds; a bound, never a delay
# The command the README's install gives (.venv/bin/acp-memory), run by its path: not on PATH.
SCRIPT = Path(sys.executable).parent / "acp-memory"
COMMAND = [str(SCRIPT)] if SCRIPT.is_file() else [sys.executable, "-m", "acp_memory"]


def _env(tmp: Path) -> dict[str, str]:
    # TMPDIR: the fresh folder the demo makes (and keeps) lands in the test's own folder.
    # PATH without the venv's bin, as after the README's install.
    env = {**os.environ, "TMPDIR": str(tmp), "ACP_MEMORY_HOME": str(tmp / "unused-home")}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != SCRIPT.parent
    )
    env.pop("OPENAI_API_KEY", None)
    return env


def _run(*args: str, tmp: Path, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, env=_env(tmp), timeout=TIMEOUT, **kw
    )


@pytest.mark.subprocess
def test_the_demo_recalls_a_note_saves_a_fact_and_recalls_it_from_disk_in_a_kept_home(tmp_path):
    project = tmp_path / "project"  # a project with no memory folder
    project.mkdir()
    done = _run("demo", "--cwd", str(project), tmp=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    home = Path(re.search(r"^ +home +(\S+) +\(kept after the demo\)$", out, re.M)[1])
    assert home.parent.parent == tmp_path and home.is_dir()  # a fresh folder, still there

    # The seeded note recalled, the new fact saved, then recalled by a new process.
    turns = re.split(r"^ +you: ", out, flags=re.M)[1:]
    assert [t.splitlines()[0] for t in turns] == [
        "What is the staging server called?",
        "Remember that my favourite fruit is the mango.",
        "What is my favourite fruit?",
        "Forget that my favourite fruit is the mango.",
    ]
    assert "- The staging server is called bramble." in turns[0]
    assert "Saved to global memory: My favourite fruit is the mango." in turns[1]
    assert "- My favourite fruit is the mango." in turns[2]
    assert "Deleted:\n         - My favourite fruit is the mango." in turns[3]
    saved = home / "memory" / "my-favourite-fruit-is-the-mango.md"
    assert saved.read_text().strip() == "My favourite fruit is the mango."
    assert not (project / "memory").exists()

    # Each turn's memory run: started, then finished with its report delivered, before the
    # answer that used it.
    for turn in turns:
        lines = [line.strip() for line in turn.splitlines()]
        memory = [i for i, line in enumerate(lines) if line.startswith("[memory]")]
        answer = next(i for i, line in enumerate(lines) if line.startswith("agent:"))
        assert len(memory) == 2 and memory[1] < answer, turn
        started, finished = (lines[i] for i in memory)
        assert re.fullmatch(r"\[memory\] run bg_\d+ started: child session sess_\w{24}", started)
        assert re.fullmatch(
            r"\[memory\] run bg_\d+ succeeded in \d+ ms; its report reached this turn", finished
        )

    # The child bundles it lists are on disk, memory children of their session.
    listed = re.findall(
        r"^ +(\S+)/\n((?: +subagents/.*\n)+)", out[out.index("== the memory runs on disk") :], re.M
    )
    assert len(listed) == 2
    for parent, children in listed:
        parent_id = Path(parent).name
        for child in re.findall(r"(subagents/sess_\w+/session\.json)", children):
            record = json.loads((Path(parent) / child).read_text())
            assert record["subagentName"] == "memory"
            assert record["parentSessionId"] == parent_id
    assert sum(c.count('subagentName "memory"') for _, c in listed) == 4

    # The forgetting run's delete, as the history keeps it, brought back by `notes undo`.
    kept = re.search(r"^== the memory history keeps what that run deleted:\n +(chg_\w{12})  .*"
                     r"  delete  global:my-favourite-fruit-is-the-mango\.md: deleted, 33 bytes; "
                     r"by memory_run \(session (sess_\w+), task (bg_\d+)\): "
                     r'"Forget that my favourite fruit is the mango\."$', out, re.M)
    assert kept, out
    change = kept[1]
    fresh = re.findall(r"^ +session (sess_\w+)$", out, re.M)[1]
    assert (kept[2], kept[3]) == (fresh, "bg_2")  # the forgetting run of the fresh session
    undo = out[out.index("== brought back with `acp-memory notes undo`:") :].splitlines()[1:4]
    words = shlex.split(undo[0])
    assert words[: len(COMMAND) + 5] == ["$", *COMMAND, "notes", "undo", change, "-y"]
    assert re.fullmatch(rf" +undid {change}: restored global:my-favourite-fruit-is-the-mango"
                        r"\.md; the undo is chg_\w{12}", undo[1]), undo
    assert undo[2].strip() == ("global:my-favourite-fruit-is-the-mango.md: My favourite fruit "
                               "is the mango.")

    # The commands it prints work as printed, by the path of the program that ran.
    notes = re.search(r"^ +(\S.* notes list --home .+)$", out, re.M)[1]
    assert shlex.split(notes)[: len(COMMAND)] == COMMAND
    listing = subprocess.run(
        shlex.split(notes), capture_output=True, text=True, env=_env(tmp_path), cwd=project,
        timeout=TIMEOUT, check=False,
    )
    assert "global:my-favourite-fruit-is-the-mango.md" in listing.stdout, listing.stderr
    history = re.search(r"^ +(\S.* notes log --home .+?)   #", out, re.M)[1]
    logged = subprocess.run(
        shlex.split(history), capture_output=True, text=True, env=_env(tmp_path), cwd=project,
        timeout=TIMEOUT, check=False,
    )
    actions = [line.split("  ")[2] for line in logged.stdout.splitlines()]
    assert actions == ["undo", "delete", "create"], logged.stdout + logged.stderr
    log = Path(shlex.split(re.search(r"^ +cat (.+?)   #", out, re.M)[1])[0])
    assert log.read_text().rstrip().endswith("report delivered to the turn (first request)")


@pytest.mark.subprocess
def test_a_reader_that_left_early_ends_the_demo_quietly_with_its_usual_code(tmp_path):
    # `acp-memory demo | head -c 0`: the pipe's reader is gone before the first line.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [*COMMAND, "demo"], stdout=write_end, stderr=subprocess.PIPE, text=True,
            env=_env(tmp_path), timeout=TIMEOUT, check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")
    # The story went on to its end all the same.
    (home,) = tmp_path.glob("acp-memory-demo-*/home")
    assert (home / "memory" / "my-favourite-fruit-is-the-mango.md").is_file()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--home", "{home}"], "is not empty and not a demo home"),
        (["--config", "{home}/config.yaml"], "--config is not used"),
    ],
)
def test_the_demo_leaves_a_home_of_someone_elses_alone(tmp_path, argv, says):
    home = tmp_path / "home"
    home.mkdir()
    mine = "agent: {max_turns: 3}\n"
    (home / "config.yaml").write_text(mine)
    args = [a.replace("{home}", str(home)) for a in argv]
    done = _run("demo", *args, tmp=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("acp-memory: demo: ") and says in done.stderr
    assert done.stderr.count("\n") == 1
    assert sorted(p.name for p in home.iterdir()) == ["config.yaml"]
    assert (home / "config.yaml").read_text() == mine
    assert not any(p.name.startswith("acp-memory-demo-") for p in tmp_path.iterdir())


def test_a_failed_memory_run_reads_as_one_line_with_its_reason():
    line = describe_memory_run(
        {
            "status": "finished",
            "taskId": "bg_3",
            "childSessionId": "sess_x",
            "taskStatus": "failed",
            "durationMs": 12,
            "delivered": False,
            "reason": "402 Payment Required: subscription expired",
        }
    )
    assert line == (
        "run bg_3 failed in 12 ms (402 Payment Required: subscription expired); not delivered"
    )
    skipped = {"status": "skipped", "reason": "memory runs in flight for this session: 2 of 2"}
    assert describe_memory_run(skipped) == (
        "run skipped: memory runs in flight for this session: 2 of 2"
    )
