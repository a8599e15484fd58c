"""One hook command: `<shell> -c command` in a process group of its own, the event as JSON on
its stdin, its stdout and stderr kept (bounded), and the whole group killed past its timeout."""

from __future__ import annotations

import contextlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from acp_memory.tasks.process import close_group, spawn_shell

# Bytes of stdout and of stderr kept; the rest is read and dropped, so a chatty hook can
# neither block on a full pipe nor flood a turn's context.
OUTPUT_LIMIT = 64 * 1024
# After the shell exits, how long a process it left in the background may hold its pipes.
EOF_GRACE_SECONDS = 1.0
# A timed-out or unstartable hook counts as this exit code: logged and ignored.
FAILED = 1


@dataclass(frozen=True)
class HookRun:
    """How one hook command ended."""

    command: str
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False


async def run_hook(command: str, payload: bytes, cwd: Path, limit_seconds: float) -> HookRun:
    """Run `command` in `cwd` with `payload` on stdin; a run past `limit_seconds` is killed
    (process group and all) and ends with exit code 1, as does one that cannot start."""
    try:
        proc = await spawn_shell(
            command,
            cwd,
            # Claude Code's variable, so a pasted "$CLAUDE_PROJECT_DIR/.claude/hooks/x.sh" works.
            {"CLAUDE_PROJECT_DIR": str(cwd)},
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        return HookRun(command, FAILED, "", f"cannot start it: {exc}")
    out, err = _Capture(), _Capture()
    code: int | None = None
    try:
        with anyio.move_on_after(limit_seconds):
            async with anyio.create_task_group() as tg:
                assert proc.stdin and proc.stdout and proc.stderr
                tg.start_soon(_feed, proc.stdin, payload)
                tg.start_soon(out.drain, proc.stdout)
                tg.start_soon(err.drain, proc.stderr)
                code = await proc.wait()
                with anyio.move_on_after(EOF_GRACE_SECONDS):
                    await out.eof.wait()
                    await err.eof.wait()
                tg.cancel_scope.cancel()
    finally:
        # Timed out, or the turn was cancelled while it ran: its group goes with it. What a
        # hook that ended by itself left running is its own business.
        await close_group(proc, kill=code is None)
    if code is None:
        return HookRun(command, FAILED, out.text(), err.text(), timed_out=True)
    return HookRun(command, code, out.text(), err.text())


async def _feed(stream: ByteSendStream, payload: bytes) -> None:
    try:
        await stream.send(payload)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # a hook need not read its stdin
    finally:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await stream.aclose()


class _Capture:
    """One output pipe, read to its end, its first OUTPUT_LIMIT bytes kept."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.eof = anyio.Event()

    async def drain(self, stream: ByteReceiveStream) -> None:
        try:
            async for chunk in stream:
                room = OUTPUT_LIMIT - len(self.data)
                if room > 0:
                    self.data += chunk[:room]
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        self.eof.set()

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")
