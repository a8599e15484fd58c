"""A process that runs commands and is told to terminate takes their process groups with it
(they live in sessions of their own, so the signal alone would leave them running)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from tasks.procs import Fifo, assert_gone

pytestmark = pytest.mark.anyio

# Each runner starts with SIGHUP as a terminal's process has it: one started under nohup (a
# CI script's loop) inherits it ignored, and an ignored SIGHUP rightly ends nothing.
DEFAULT_SIGNALS = "import signal; signal.signal(signal.SIGHUP, signal.SIG_DFL)\n"

RUNNER = DEFAULT_SIGNALS + """
import sys, anyio
from pathlib import Path
from acp_memory.tasks.pool import TaskPool
from acp_memory.tasks.process import groups_killed_on_termination

async def main(fifo: str) -> None:
    with groups_killed_on_termination():
        async with anyio.create_task_group() as tg:
            pool = TaskPool(tg, "sess_x", Path(fifo).parent / "bundle")
            task = await pool.start_command(
                f'sleep 600 & echo "$$ $!" > {fifo}; wait', Path(fifo).parent
            )
            while task.record.pid is None:  # spawned, and known to the process
                await anyio.wait_all_tasks_blocked()
            print("followed", flush=True)
            await anyio.sleep_forever()

anyio.run(main, sys.argv[1])
"""


async def terminate_and_check_groups(runner: str, tmp_path: Path, sig: signal.Signals) -> None:
    """Run `runner` (a script told a FIFO), wait until it follows its command's process group,
    send it `sig`: it must end by that signal, the group gone with it."""
    ready = Fifo(tmp_path / "ready")
    proc = await anyio.open_process(
        [sys.executable, "-c", runner, str(ready.path)], stderr=subprocess.DEVNULL
    )
    async with proc:
        assert proc.stdout is not None
        leader, child = map(int, (await ready.read_line(timeout=20)).split())
        try:
            with anyio.fail_after(20):
                assert (await proc.stdout.receive()).startswith(b"followed")
            proc.send_signal(sig)
            with anyio.fail_after(10):
                code = await proc.wait()
            assert code == -sig  # it still ends by the signal, as it would have
            await assert_gone(leader, child)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(leader, signal.SIGKILL)  # a failing run leaves nothing behind
            if proc.returncode is None:
                proc.kill()  # nor a runner that never got its signal


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
async def test_a_terminated_agent_process_kills_its_commands_process_groups(
    tmp_path: Path, sig: signal.Signals
):
    await terminate_and_check_groups(RUNNER, tmp_path, sig)


HOOK_RUNNER = DEFAULT_SIGNALS + """
import sys, anyio
from pathlib import Path
from acp_memory.hooks.command import run_hook
from acp_memory.tasks import process
from acp_memory.tasks.process import groups_killed_on_termination

async def main(fifo: str) -> None:
    with groups_killed_on_termination():
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                run_hook, f'sleep 600 & echo "$$ $!" > {fifo}; wait', b"{}", Path(fifo).parent, 600
            )
            # The shell may write its line before run_hook has tracked its group; a signal in
            # that gap is not what this test is about, so it waits until the group is known.
            while not process._LIVE_GROUPS:
                await anyio.wait_all_tasks_blocked()
            print("followed", flush=True)

anyio.run(main, sys.argv[1])
"""


async def test_a_terminated_agent_process_kills_a_running_hooks_process_group(tmp_path: Path):
    await terminate_and_check_groups(HOOK_RUNNER, tmp_path, signal.SIGTERM)
