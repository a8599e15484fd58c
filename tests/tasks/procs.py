"""Process helpers for the pool tests: FIFOs a command and a test talk through (no sleeps), a
pool in its own task group, and whether a process or a process group is really gone."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from acp_memory.tasks.admission import PoolSettings
from acp_memory.tasks.pool import TaskPool

GRACE_S = 0.3  # the kill grace the tests use: short, still room for a shell to die


class Fifo:
    """A named pipe the test holds open read-write, so neither side ever blocks on open.

    A command tells the test something with `echo ready > PATH`; the test lets a command go
    on with `send`, which a `read x < PATH` in the command receives.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        self._buffer = b""

    async def read_line(self, timeout: float = 10) -> str:
        with anyio.fail_after(timeout):
            while b"\n" not in self._buffer:
                await anyio.wait_readable(self.fd)
                with contextlib.suppress(BlockingIOError):
                    self._buffer += os.read(self.fd, 4096)
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def send(self, text: str = "go") -> None:
        os.write(self.fd, text.encode() + b"\n")

    def close(self) -> None:
        os.close(self.fd)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of a pid, None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw.rpartition(")")[2].split()
    return fields[0], int(fields[2])


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped is dead: it runs nothing and holds nothing)."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


async def assert_gone(leader: int, *children: int, timeout: float = 10) -> None:
    """The command's known processes have exited and its process group has no live member.

    Death follows a signal by a moment (the kernel finishes the exit asynchronously), so every
    process asserted dead is first awaited through a pidfd, which turns readable when it has
    exited: the leader, each child, then whatever the group still holds, until it holds nothing.
    A process nobody killed keeps its wait open until the bound fails the test.
    """
    with anyio.fail_after(timeout):
        for pid in (leader, *children):
            await _exited(pid)
        while members := group_members(leader):
            for pid in members:
                await _exited(pid)
    assert not alive(leader)
    assert group_members(leader) == []


async def _exited(pid: int) -> None:
    """Return once pid has exited (at once when there is no such process)."""
    if pid <= 0:
        return
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await anyio.wait_readable(fd)
    finally:
        os.close(fd)


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[1] == pgid and stat[0] != "Z":
                members.append(int(entry.name))
    return members


@contextlib.asynccontextmanager
async def pool_in(bundle: Path, **settings: Any) -> AsyncIterator[TaskPool]:
    """A pool owned by a task group of its own, closed (tasks stopped) when the block ends."""
    settings.setdefault("kill_grace_seconds", GRACE_S)
    async with anyio.create_task_group() as tg:
        pool = TaskPool(tg, "sess_" + "0" * 24, bundle, PoolSettings(**settings))
        try:
            yield pool
        finally:
            with anyio.CancelScope(shield=True), anyio.fail_after(10):
                await pool.aclose()
            tg.cancel_scope.cancel()  # as the runner does: whatever still runs is stopped
