"""A running command: a local process group, or a terminal the client runs for us.

Either way a pump task reads the command to its end in a task group its starter chose (the
session runner's owner group when there is a pool), writing its output to a TaskLog, so the
command can outlive the tool call that started it. Stopping means the whole process group:
SIGTERM, then SIGKILL after a grace.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import anyio
from anyio.abc import Process, TaskGroup

from acp_memory.editor import Editor
from acp_memory.tasks.log import TaskLog

log = logging.getLogger(__name__)

# bash when there is one: models write bash; sh otherwise.
SHELL = shutil.which("bash") or "/bin/sh"
# How long a command may take to go after SIGTERM, and a client terminal to answer a kill.
KILL_GRACE_SECONDS = 2.0
# Pagers wait for a keypress that never comes.
_QUIET_ENV = {"PAGER": "cat", "GIT_PAGER": "cat"}

# Process groups of this process's commands: killed at interpreter exit even if the event
# loop never got to stop them.
_LIVE_GROUPS: set[int] = set()


@atexit.register
def _kill_live_groups() -> None:
    for pgid in list(_LIVE_GROUPS):
        signal_group(pgid, signal.SIGKILL)


@contextlib.contextmanager
def groups_killed_on_termination() -> Iterator[None]:
    """While the block runs, SIGTERM or SIGHUP to this process first kills the process groups
    of its commands, then acts as it did before. Commands live in sessions of their own, so
    the signal's default action (no atexit, no cleanup) would leave them running."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; the atexit hook still holds
        return
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        _kill_live_groups()
        before = previous.get(signum)
        if callable(before):
            before(signum, frame)
        elif before != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for signum, before in previous.items():
            if signal.getsignal(signum) is handler:
                signal.signal(signum, before)


def signal_group(pgid: int, sig: int) -> None:
    """Send sig to a process group; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def spawn_shell(
    command: str, cwd: Path, env: Mapping[str, str], *, stdin: int, stderr: int
) -> Process:
    """`<shell> -c command` (env added to ours) leading a process group of its own, so a kill
    reaches whatever it starts; SIGTERM, SIGHUP or exit kill the group until close_group.
    OSError when it cannot be spawned."""
    # Shielded: a spawn cut short by a cancel would leave a process nobody follows.
    with anyio.CancelScope(shield=True):
        proc = await anyio.open_process(
            [SHELL, "-c", command],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env={**os.environ, **env},
            start_new_session=True,
        )
    _LIVE_GROUPS.add(proc.pid)
    return proc


async def close_group(proc: Process, *, kill: bool = True) -> None:
    """Done with a spawn_shell process: SIGKILL what is left of its group (unless `kill` is
    false), stop following it, and reap it (bounded, shielded)."""
    with anyio.CancelScope(shield=True):
        if kill:
            signal_group(proc.pid, signal.SIGKILL)
        _LIVE_GROUPS.discard(proc.pid)
        with anyio.move_on_after(1):
            await proc.aclose()


@dataclass(frozen=True)
class ExitInfo:
    """How a command ended: its exit code, or the signal that killed it."""

    exit_code: int | None
    signal: str | None = None

    def describe(self) -> str:
        if self.exit_code is not None:
            return f"exit code {self.exit_code}"
        return f"killed by {self.signal}" if self.signal else "ended with no exit status"


class CommandProcess(Protocol):
    """What the pool and run_command need of a running command."""

    pid: int | None  # the local process group's leader; None for a client terminal
    terminal_id: str | None  # the client's terminal, shown in the tool call
    log: TaskLog
    done: anyio.Event  # set once it ended and its output is in the log
    exit: ExitInfo | None
    error: str | None  # why it could not run or be followed (the client failed)
    started: float  # anyio.current_time() at start

    async def kill(self) -> None:
        """End it, process group and all; returns once it is done (bounded)."""
        ...

    async def live_output(self) -> bytes | None:
        """Output so far where the log does not have it yet (a client terminal), else None."""
        ...


class LocalProcess:
    """`<shell> -c command` in its own process group, stdout and stderr into the log."""

    terminal_id: str | None = None

    def __init__(self, proc: Process, log: TaskLog, grace: float) -> None:
        self._proc = proc
        self.pid: int | None = proc.pid
        self.log = log
        self.grace = grace
        self.done = anyio.Event()
        self.exit: ExitInfo | None = None
        self.error: str | None = None
        self.started = anyio.current_time()
        self._eof = anyio.Event()

    @classmethod
    async def start(
        cls, tg: TaskGroup, command: str, cwd: Path, log: TaskLog, grace: float
    ) -> LocalProcess:
        """Spawn it and start its pump in tg (a cancel then reaches it through the pump).
        OSError when it cannot be spawned."""
        proc = await spawn_shell(
            command, cwd, _QUIET_ENV, stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        self = cls(proc, log, grace)
        tg.start_soon(self._pump, name=f"command {proc.pid}")
        return self

    async def kill(self) -> None:
        if self.done.is_set():
            return
        signal_group(self._proc.pid, signal.SIGTERM)
        with anyio.move_on_after(self.grace):
            await self.done.wait()
        if not self.done.is_set():
            self._kill_hard()
            with anyio.move_on_after(max(self.grace, 1.0)):
                await self.done.wait()

    async def live_output(self) -> bytes | None:
        return None

    async def _pump(self) -> None:
        proc = self._proc
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read)
                code = await proc.wait()
                self.exit = _exit_info(code)
                # What is still in the pipe arrives at once; a child left running in the
                # background holds the pipe open and would hold the task for ever.
                with anyio.move_on_after(self.grace):
                    await self._eof.wait()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if self.exit is None:  # cancelled while it ran: the owner is stopping
                    self.exit = await self._terminate()
                await close_group(proc)  # what it left behind in its group goes with it
                self.done.set()

    async def _read(self) -> None:
        assert self._proc.stdout is not None
        try:
            async for chunk in self._proc.stdout:
                await self.log.write(chunk)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        self._eof.set()

    async def _terminate(self) -> ExitInfo:
        signal_group(self._proc.pid, signal.SIGTERM)
        with anyio.move_on_after(self.grace):
            return _exit_info(await self._proc.wait())
        self._kill_hard()
        with anyio.move_on_after(max(self.grace, 1.0)):
            return _exit_info(await self._proc.wait())
        return ExitInfo(None, "SIGKILL")  # not reaped yet; nothing more a signal can do

    def _kill_hard(self) -> None:
        signal_group(self._proc.pid, signal.SIGKILL)
        # The leader too, in case its group could not be signalled.
        with contextlib.suppress(ProcessLookupError):
            self._proc.kill()


def _exit_info(code: int) -> ExitInfo:
    if code < 0:  # killed by a signal
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return ExitInfo(None, name)
    return ExitInfo(code)


class TerminalProcess:
    """A command in a terminal the client runs (terminal/*): it shows the command live in
    the tool call; its output reaches the log when it ends, and on request while it runs."""

    pid: int | None = None

    def __init__(self, editor: Editor, session_id: str, terminal_id: str, log: TaskLog,
                 grace: float) -> None:
        self.editor = editor
        self.session_id = session_id
        self.terminal_id: str | None = terminal_id
        self.log = log
        self.grace = grace
        self.done = anyio.Event()
        self.exit: ExitInfo | None = None
        self.error: str | None = None
        self.started = anyio.current_time()
        self._released = False

    @classmethod
    async def start(
        cls,
        tg: TaskGroup,
        editor: Editor,
        session_id: str,
        command: str,
        cwd: Path,
        log: TaskLog,
        grace: float,
    ) -> TerminalProcess:
        """Ask the client for a terminal and start following it in tg."""
        terminal_id = await editor.create_terminal(session_id, command, str(cwd), log.limit)
        self = cls(editor, session_id, terminal_id, log, grace)
        tg.start_soon(self._pump, name=f"terminal {terminal_id}")
        return self

    async def kill(self) -> None:
        if self.done.is_set():
            return
        with anyio.move_on_after(self.grace):
            await self._call_quietly(self.editor.kill_terminal)
        with anyio.move_on_after(self.grace * 2):
            await self.done.wait()

    async def live_output(self) -> bytes | None:
        if self._released:
            return None
        try:
            with anyio.fail_after(max(self.grace, 5)):
                out = await self.editor.terminal_output(self.session_id, self._tid)
        except Exception as exc:  # the client failed or left: the log has what we have
            log.debug("terminal_output failed: %s", exc)
            return None
        return out.output.encode("utf-8", errors="replace")

    @property
    def _tid(self) -> str:
        assert self.terminal_id is not None
        return self.terminal_id

    async def _pump(self) -> None:
        try:
            try:
                ended = await self.editor.wait_for_terminal_exit(self.session_id, self._tid)
                self.exit = ExitInfo(ended.exit_code, ended.signal)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:
                self.error = f"the client's terminal failed: {exc}"
        finally:
            with anyio.CancelScope(shield=True):
                if self.exit is None and self.error is None:  # cancelled: the owner stops
                    with anyio.move_on_after(self.grace):
                        await self._call_quietly(self.editor.kill_terminal)
                    self.error = "stopped"
                with anyio.move_on_after(max(self.grace, 5)):
                    await self._capture()
                with anyio.move_on_after(self.grace):
                    await self._call_quietly(self.editor.release_terminal)
                self._released = True
                self.done.set()

    async def _capture(self) -> None:
        try:
            out = await self.editor.terminal_output(self.session_id, self._tid)
        except Exception as exc:
            log.debug("terminal_output failed: %s", exc)
            return
        if out.truncated:
            self.log.mark_truncated()
        await self.log.write(out.output)
        if self.exit is None and out.exit is not None:
            self.exit = ExitInfo(out.exit.exit_code, out.exit.signal)

    async def _call_quietly(self, method: Callable[[str, str], Awaitable[None]]) -> None:
        try:
            await method(self.session_id, self._tid)
        except Exception as exc:  # a client that already forgot the terminal
            log.debug("terminal call failed: %s", exc)


async def start_process(
    tg: TaskGroup,
    command: str,
    cwd: Path,
    log: TaskLog,
    *,
    grace: float = KILL_GRACE_SECONDS,
    editor: Editor | None = None,
    session_id: str = "",
) -> CommandProcess:
    """A command running in the client's terminal when the editor offers one, else locally."""
    if editor is not None and editor.can_run_terminals:
        return await TerminalProcess.start(tg, editor, session_id, command, cwd, log, grace)
    return await LocalProcess.start(tg, command, cwd, log, grace)
