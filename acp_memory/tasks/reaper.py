"""What the agent's children leave behind: the agent as a child subreaper (Linux), and the
processes a server started found, ended and reaped.

Without a subreaper, a process whose parent died (a server that exited on end of input, a
shell that backgrounded a command) goes to init, out of reach. As a subreaper the agent
becomes its parent instead: it is then the agent's to end with the session that started it,
and to reap, or it stays a zombie. Every process the agent itself spawns leads a session of
its own (`start_new_session`), and asyncio waits for those; an adopted one never leads its
session unless it called setsid, so `pid != sid` tells an adopted child from one of ours.
Elsewhere than Linux all of this is a no-op.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass

import anyio

PR_SET_CHILD_SUBREAPER = 36
# How long the processes of a family get after SIGTERM, then after SIGKILL.
END_GRACE_SECONDS = 2.0
_POLL_SECONDS = 0.05

_subreaper = False


def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants (once, as a surface that starts
    MCP servers starts); whether it is one. A no-op elsewhere than Linux."""
    global _subreaper
    if not _subreaper and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _subreaper


def is_subreaper() -> bool:
    """Whether become_subreaper succeeded in this process."""
    return _subreaper


@dataclass(frozen=True)
class Proc:
    """One process as /proc/<pid>/stat has it."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    zombie: bool


def _stat(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields follow its last ")".
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0] in (b"Z", b"X"))
    except (IndexError, ValueError):
        return None


def processes() -> list[Proc]:
    """Every process /proc shows (none where there is no /proc)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return [p for name in names if name.isdigit() and (p := _stat(int(name))) is not None]


def _carries(pid: int, mark: bytes) -> bool:
    """Whether the process was started with `mark` (NAME=value) in its environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in f.read().split(b"\0")
    except OSError:  # gone, a zombie's, or another user's
        return False


def family(leader: int | None, mark: str) -> list[Proc]:
    """The processes a server started (`leader`, in a session of its own): those of its
    process group or session, those that inherited `mark` in their environment (one that left
    both with setsid), and the descendants of all of them; never this process."""
    procs = processes()
    me = os.getpid()
    ours = {os.getpgid(0), os.getsid(0), 0, 1}  # never this process's own, nor init's
    mark_bytes = mark.encode()
    found = {p.pid for p in procs if p.pid != me and _carries(p.pid, mark_bytes)}
    heads = {leader} if leader is not None else set()
    heads |= {p.pgid for p in procs if p.pid in found} | {p.sid for p in procs if p.pid in found}
    heads -= ours
    found |= {p.pid for p in procs if p.pgid in heads or p.sid in heads}
    children: dict[int, list[int]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    found.discard(me)
    return [p for p in procs if p.pid in found]


def reap(pids: Iterable[int]) -> None:
    """Wait for those of `pids` that are this process's children and have ended."""
    me = os.getpid()
    for pid in pids:
        proc = _stat(pid)
        if proc is not None and proc.ppid == me and proc.zombie:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def reap_adopted() -> None:
    """Reap the ended children this process adopted as a subreaper (never one it spawned:
    those lead their own session, and asyncio waits for them)."""
    me = os.getpid()
    reap(p.pid for p in processes() if p.ppid == me and p.zombie and p.pid != p.sid)


async def reap_adopted_forever() -> None:
    """A subreaper's background task: reap what it adopted as each child's end is signalled
    (SIGCHLD; signals coalesce, so each round reaps every one that ended), so no zombie piles
    up and nothing is polled."""
    with anyio.open_signal_receiver(signal.SIGCHLD) as ended:
        await anyio.to_thread.run_sync(reap_adopted)  # any that ended before we listened
        async for _ in ended:
            await anyio.to_thread.run_sync(reap_adopted)


def _signal(procs: Iterable[Proc], sig: int) -> None:
    for proc in procs:
        if not proc.zombie:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, sig)


async def end_family(leader: int | None, mark: str, grace: float = END_GRACE_SECONDS) -> None:
    """End every process of the family (see `family`): SIGTERM, SIGKILL to what is left
    after `grace`, and reap those that became this process's children (shielded, bounded)."""
    seen: set[int] = set()

    async def live() -> list[Proc]:
        procs = await anyio.to_thread.run_sync(family, leader, mark)
        # Never the leader: asyncio waits for the process it spawned.
        seen.update(p.pid for p in procs if p.pid != leader)
        # A zombie has lost its environment: reap what was seen alive.
        await anyio.to_thread.run_sync(reap, list(seen))
        return [p for p in procs if not p.zombie]

    async def gone_within(seconds: float) -> bool:
        with anyio.move_on_after(seconds):
            # Not our children, most of them: nothing to wait on but /proc.
            while await live():  # noqa: ASYNC110 - polled: no event says they are gone
                await anyio.sleep(_POLL_SECONDS)
            return True
        return False

    with anyio.CancelScope(shield=True):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            procs = await live()
            if not procs:
                return
            _signal(procs, sig)
            if await gone_within(grace):
                return


async def exited(pid: int) -> None:
    """Return once the process has exited (at once when there is none; never where there
    are no pidfds). Its children may still hold its pipes: this does not wait for them."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # not Linux, or a kernel before 5.3
        await anyio.sleep_forever()
    try:
        await anyio.wait_readable(fd)
    finally:
        os.close(fd)


def spawned_with(mark: str) -> int | None:
    """The child this process spawned, in a session of its own, with `mark` (NAME=value) in
    its environment; None when it is gone."""
    me, mark_bytes = os.getpid(), mark.encode()
    for proc in processes():
        if proc.ppid == me and proc.pid == proc.sid and _carries(proc.pid, mark_bytes):
            return proc.pid
    return None
