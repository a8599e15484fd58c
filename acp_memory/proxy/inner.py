"""The inner agent: the ACP agent the proxy stands in front of, as a process of its own.

It gets the environment passed on (plus `proxy.agent.env`), leads a process group of its own
(what it starts, `npx`'s node for one, goes with it), and its stderr is passed through to
ours line by line, the last line kept: why it died, as often as not.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from acp_memory.jsonrpc.framing import OversizedLine, read_lines
from acp_memory.tasks.process import KILL_GRACE_SECONDS, signal_group

# A stderr line past this is passed on as a note of its size: an agent that never writes a
# newline cannot grow our memory.
MAX_STDERR_LINE = 64 * 1024
# How long the agent's last stderr lines may take to arrive once its output ended.
STDERR_DRAIN_SECONDS = 1.0


class CannotStart(Exception):
    """The inner agent's command could not be started; str() is the one line to print."""


class InnerAgent:
    """A started inner agent: its stdout and stdin are the relay's agent side."""

    def __init__(self, proc: Process, name: str) -> None:
        self._proc = proc
        self.name = name
        self.last_line = ""  # the last non-blank line of its stderr
        self._stderr_done = anyio.Event()

    @property
    def stdout(self) -> ByteReceiveStream:
        """What the agent writes: the relay reads it."""
        assert self._proc.stdout is not None
        return self._proc.stdout

    @property
    def stdin(self) -> ByteSendStream:
        """What the agent reads: the relay writes to it."""
        assert self._proc.stdin is not None
        return self._proc.stdin

    async def exit_line(self) -> str:
        """How it ended, for the editor's requests it left unanswered (its output has ended):
        `the inner agent <command> exited with code N: <its last stderr line>`."""
        code: int | None = None
        with anyio.move_on_after(KILL_GRACE_SECONDS):
            code = await self._proc.wait()
        with anyio.move_on_after(STDERR_DRAIN_SECONDS):
            await self._stderr_done.wait()
        if code is None:
            how = "closed its output"
        elif code < 0:
            # The code a shell would give, and the signal that is its reason.
            how = f"exited with code {128 - code} (killed by {_signal_name(-code)})"
        else:
            how = f"exited with code {code}"
        line = f"the inner agent {self.name} {how}"
        return f"{line}: {self.last_line}" if self.last_line else line

    async def _pass_stderr(self) -> None:
        assert self._proc.stderr is not None
        try:
            async for line in read_lines(self._proc.stderr, MAX_STDERR_LINE):
                if isinstance(line, OversizedLine):
                    line = f"[a line of {line.size} bytes, not shown]".encode()
                _to_stderr(line + b"\n")
                if text := line.decode("utf-8", "replace").strip():
                    self.last_line = text
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            self._stderr_done.set()

    async def _stop(self, grace: float) -> None:
        """Its stdin closed, then SIGTERM, then SIGKILL, each after `grace`; its group's
        leftovers killed and the process reaped."""
        proc = self._proc
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await self.stdin.aclose()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with anyio.move_on_after(grace):
                await proc.wait()
            if proc.returncode is not None:
                break
            signal_group(proc.pid, sig)
        signal_group(proc.pid, signal.SIGKILL)  # what it started and left behind in its group
        with anyio.move_on_after(grace):
            await proc.aclose()


@contextlib.asynccontextmanager
async def inner_agent(
    argv: Sequence[str], env: Mapping[str, str], grace: float = KILL_GRACE_SECONDS
) -> AsyncIterator[InnerAgent]:
    """Start `argv` with our environment plus `env`; stopped when the block ends (stdin
    closed, then SIGTERM, then SIGKILL to its group, `grace` apart). CannotStart when it
    cannot be started."""
    command = argv[0]
    try:
        proc = await anyio.open_process(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
            start_new_session=True,
        )
    except OSError as exc:
        raise CannotStart(
            f"acp-memory proxy: cannot start the inner agent {command}: {exc.strerror or exc}"
        ) from None
    agent = InnerAgent(proc, command)
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent._pass_stderr)
        try:
            yield agent
        finally:
            with anyio.CancelScope(shield=True):
                await agent._stop(grace)
                with anyio.move_on_after(STDERR_DRAIN_SECONDS):
                    await agent._stderr_done.wait()
            tg.cancel_scope.cancel()


def _to_stderr(data: bytes) -> None:
    # A blocking write, as the log's own: stderr is the editor's log, read as it comes.
    stream = getattr(sys.stderr, "buffer", None)
    if stream is not None:
        stream.write(data)
        stream.flush()
    else:  # a test's capture
        sys.stderr.write(data.decode("utf-8", "replace"))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
