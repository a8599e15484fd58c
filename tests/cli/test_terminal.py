"""What a person at a terminal sees: Ctrl-C stops every command with exit status 130 and at
most one line on stderr; a bare run on a terminal says what it is instead of seeming to hang."""

from __future__ import annotations

import json
import os
import pty
import queue
import signal
import socket
import subprocess
import sys
import termios
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Self

import pytest

from acp_memory.cli import TTY_HINT
from acp_memory.demo import MARKER

WAIT = 30  # seconds; a bound on every wait, never a delay

pytestmark = pytest.mark.subprocess


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# A test runner started in the background has SIGINT ignored, its children inherit that, and
# Python keeps an ignored SIGINT ignored; the child must react to Ctrl-C as in a terminal.
RESTORE_SIGINT = _default_sigint if signal.getsignal(signal.SIGINT) == signal.SIG_IGN else None


class Child:
    """`python -m acp_memory ARGS` in its own process group, its pipes drained by threads."""

    def __init__(self, *args: str, home: Path, cwd: Path, stdin: int = subprocess.PIPE) -> None:
        env = {**os.environ, "ACP_MEMORY_HOME": str(home), "PYTHONUNBUFFERED": "1"}
        env.pop("OPENAI_API_KEY", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "acp_memory", *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            preexec_fn=RESTORE_SIGINT,
            # A terminal's Ctrl-C reaches the whole foreground group, children included.
            start_new_session=True,
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._err_lines: queue.Queue[bytes] = queue.Queue()
        self._stderr = bytearray()
        self._pumps = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr += line
            self._err_lines.put(line)

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def line(self) -> bytes:
        """The next stdout line; fails the test if none comes within WAIT."""
        return self._lines.get(timeout=WAIT)

    def err_line(self) -> bytes:
        """The next stderr line; fails the test if none comes within WAIT."""
        return self._err_lines.get(timeout=WAIT)

    def ctrl_c(self) -> tuple[int, str]:
        """SIGINT to the process group, as a terminal sends it; the exit status and all stderr."""
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.finish()

    def finish(self) -> tuple[int, str]:
        """Wait for the exit; the exit status and everything written on stderr."""
        code = self.proc.wait(timeout=WAIT)
        for pump in self._pumps:
            pump.join(timeout=WAIT)
        return code, self._stderr.decode()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=WAIT)
        if self.proc.stdin is not None:
            self.proc.stdin.close()


@pytest.fixture
def held_model(tmp_path: Path) -> Iterator[tuple[socket.socket, Path]]:
    """A model server that accepts a connection and never answers, and a home whose
    config.yaml sends every model call there: a process waiting on it is ready to interrupt."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(WAIT)
    port = server.getsockname()[1]
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        "providers:\n"
        f"  - {{name: held, type: openai, api_base: 'http://127.0.0.1:{port}/v1', api_key: k}}\n"
        "models: [{model: held/m}]\n"
        "agent: {model: held/m, llm_retry_max: 0}\n"
    )
    with server:
        yield server, home


def _accept(server: socket.socket) -> socket.socket:
    conn, _ = server.accept()
    return conn


INITIALIZE = (
    json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    ).encode()
    + b"\n"
)


def test_ctrl_c_on_an_idle_acp_server_exits_130_quietly(tmp_path: Path) -> None:
    with Child("acp", home=tmp_path / "home", cwd=tmp_path) as child:
        child.send(INITIALIZE)
        assert json.loads(child.line())["result"]["protocolVersion"] == 1
        code, stderr = child.ctrl_c()
    assert (code, stderr) == (130, "")


def test_ctrl_c_while_print_mode_waits_for_the_model_exits_130_with_one_line(
    tmp_path: Path, held_model: tuple[socket.socket, Path]
) -> None:
    server, home = held_model
    with Child("-p", "hello", "--home", str(home), home=home, cwd=tmp_path) as child:
        with _accept(server):
            code, stderr = child.ctrl_c()
    assert (code, stderr) == (130, "acp-memory: interrupted\n")


def test_ctrl_c_while_notes_search_reads_stdin_exits_130_with_one_line(tmp_path: Path) -> None:
    args = ("notes", "search", "-", "--json", "--cwd", str(tmp_path))
    with Child(*args, home=tmp_path / "home", cwd=tmp_path) as child:
        child.send(b"anything\n")
        assert json.loads(child.line()) == []
        code, stderr = child.ctrl_c()
    assert (code, stderr) == (130, "acp-memory: interrupted\n")


def test_ctrl_c_during_the_demo_exits_130_with_one_line(
    tmp_path: Path, held_model: tuple[socket.socket, Path]
) -> None:
    # The demo's agent process gets the same SIGINT; neither may add a traceback. The home
    # passes for one the demo made, its config edited to use the held model.
    server, home = held_model
    config = home / "config.yaml"
    config.write_text(f"{MARKER}\n{config.read_text()}")
    with Child("demo", "--home", str(home), home=home, cwd=tmp_path) as child:
        with _accept(server):
            code, stderr = child.ctrl_c()
    assert (code, stderr) == (130, "acp-memory: interrupted\n")


def test_a_bare_run_on_a_terminal_says_what_it_is_then_serves(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    # No echo: the line typed on the terminal would otherwise come back to the controller.
    attrs = termios.tcgetattr(terminal)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(terminal, termios.TCSANOW, attrs)
    try:
        args = ("--log-level", "warning")
        with Child(*args, home=tmp_path / "home", cwd=tmp_path, stdin=terminal) as child:
            os.close(terminal)
            terminal = -1
            assert child.err_line().decode() == TTY_HINT + "\n"
            os.write(controller, INITIALIZE)
            assert json.loads(child.line())["result"]["protocolVersion"] == 1
            os.write(controller, attrs[6][termios.VEOF])  # Ctrl-D: end of input
            code, stderr = child.finish()
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    assert (code, stderr) == (0, TTY_HINT + "\n")
    for fact in ("ACP (JSON-RPC) on stdin/stdout", "started by an editor", "acp-memory --help"):
        assert fact in TTY_HINT
