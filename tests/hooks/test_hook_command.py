"""One hook command: the payload on stdin, what it printed, how it ended, and the kill of its
whole process group past its timeout."""

from __future__ import annotations

import json

import anyio
import pytest
from tasks.procs import assert_gone

from acp_memory.hooks.command import OUTPUT_LIMIT, run_hook

pytestmark = pytest.mark.anyio


async def test_the_payload_arrives_on_stdin_and_both_outputs_and_the_exit_code_come_back(
    tmp_path,
):
    payload = json.dumps({"hook_event_name": "Stop", "session_id": "sess_x"}).encode()
    command = (
        "read -r line; printf 'out:%s' \"$line\"; printf 'why' >&2; "
        "printf '%s' \"$CLAUDE_PROJECT_DIR\" > dir.txt; exit 2"
    )
    run = await run_hook(command, payload, tmp_path, 10)
    assert run.exit_code == 2 and not run.timed_out
    assert run.stdout == f"out:{payload.decode()}"
    assert run.stderr == "why"
    assert (tmp_path / "dir.txt").read_text() == str(tmp_path)  # ran in the cwd given


async def test_a_hook_past_its_timeout_is_killed_with_its_process_group(tmp_path):
    # The hook leaves a sleeper in its group and waits on it: both must go at the timeout.
    command = 'sleep 300 & echo "$$ $!" > pids; wait'
    run = await run_hook(command, b"{}", tmp_path, 1.5)
    assert run.timed_out and run.exit_code == 1
    leader, sleeper = map(int, (tmp_path / "pids").read_text().split())
    await assert_gone(leader, sleeper)


async def test_output_past_the_limit_is_read_and_dropped(tmp_path):
    # Far more than a pipe holds: the hook must not block on a full pipe.
    command = "head -c 1000000 /dev/zero | tr '\\0' x; echo done >&2"
    with anyio.fail_after(20):
        run = await run_hook(command, b"{}", tmp_path, 30)
    assert run.exit_code == 0
    assert len(run.stdout) == OUTPUT_LIMIT and set(run.stdout) == {"x"}
    assert run.stderr == "done\n"


async def test_a_hook_that_cannot_start_counts_as_exit_1(tmp_path):
    run = await run_hook("true", b"{}", tmp_path / "missing", 10)
    assert run.exit_code == 1 and not run.timed_out
    assert "cannot start it" in run.stderr and "missing" in run.stderr
