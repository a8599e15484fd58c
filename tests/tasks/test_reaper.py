"""The agent as a child subreaper: a process a command orphaned becomes the agent's child, and
once it has ended the agent reaps it while it keeps running, so no zombie piles up."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from acp import text_block
from harness import subprocess_agent

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

BOUND_S = 30  # generous: a loaded machine still gets there


def _listed(pid: int) -> bool:
    """Whether /proc shows the pid at all (a zombie too)."""
    return Path(f"/proc/{pid}").exists()


async def test_an_orphan_of_a_command_that_ended_is_reaped_while_the_agent_runs(tmp_path):
    home, project, orphan = tmp_path / "home", tmp_path / "project", tmp_path / "orphan"
    home.mkdir()
    project.mkdir()
    (home / "config.yaml").write_text("tools:\n  permission_mode: bypass\n")
    # The subshell exits at once: its sleep is orphaned, then ends.
    command = f"(sleep 0.2 & echo $! > {orphan})"
    async with subprocess_agent(home) as ed:
        sid = await ed.start_session(project)
        words = f'/tool run_command {{"command": "{command}"}}'
        with anyio.fail_after(BOUND_S):
            await ed.conn.prompt(session_id=sid, prompt=[text_block(words)])
        pid = int(orphan.read_text())
        with anyio.fail_after(BOUND_S):
            # Nothing to wait on for a process the test did not start: /proc is polled.
            while _listed(pid):  # noqa: ASYNC110
                await anyio.sleep(0.05)
