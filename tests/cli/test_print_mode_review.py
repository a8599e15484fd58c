"""memory.review: ask in print mode, a real process: nobody is asked; without --yes a memory
change is held for approval (said on stderr with how to approve it, and by the run's console
line), with --yes it is made."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli.test_print_mode import print_mode

pytestmark = pytest.mark.anyio

REMEMBER = "Remember that the kettle is blue."


@pytest.mark.subprocess
async def test_without_yes_a_memory_save_is_held_and_with_yes_it_is_made(tmp_path: Path):
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (home / "config.yaml").write_text("memory: {enable: true, review: ask}\n")
    done = await print_mode("-p", REMEMBER, home=home, cwd=project)
    assert done.code == 0, done.stderr
    (held,) = [line for line in done.lines if "held for approval" in line]
    assert held.startswith("acp-memory: memory change held for approval (pnd_"), held
    assert "global:" in held and "`acp-memory notes pending`" in held
    pending = held.split("(", 1)[1].split(")", 1)[0]
    # The run's console line says what it did, not what its search found.
    (ran,) = [line for line in done.lines if line.startswith("memory: ")]
    assert ran.startswith(f"memory: held 1 change for approval ({pending}) in "), ran
    assert not list((home / "memory").rglob("*.md"))
    assert "Not saved yet: held for approval (pnd_" in done.stdout

    done = await print_mode("--yes", "-p", REMEMBER, home=home, cwd=project)
    assert done.code == 0, done.stderr
    assert not [line for line in done.lines if "held for approval" in line]
    (note,) = (home / "memory").rglob("*.md")
    assert note.read_text() == "The kettle is blue.\n"
