"""The scripts under examples/ run as a user runs them, against a real agent process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "acp"
TIMEOUT = 120  # seconds; a bound, never a delay


def _run_example(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # its throw-away home lands here
    env.pop("ACP_MEMORY_E2E_CONFIG", None)
    return subprocess.run(
        [sys.executable, str(EXAMPLES / "acp_e2e_memory.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        cwd=tmp_path,
    )


def test_the_memory_example_passes_on_the_offline_model(tmp_path):
    done = _run_example(tmp_path, "--keep")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(" (")[0] for line in lines if line.startswith("ok: ")] == [
        "ok: a note on disk recalled",
        "ok: the new fact saved",
        "ok: a fresh session in a new process recalled it",
        "ok: 3 memory child bundles on disk",
    ]
    assert lines[-1] == "PASS"
    home = Path(next(line for line in lines if line.startswith("home kept: ")).split(": ", 1)[1])
    assert home.is_relative_to(tmp_path)
    notes = [p.read_text() for p in (home / "memory").glob("*.md")]
    assert "My favourite fruit is the mango.\n" in notes


def test_a_config_names_the_models_but_memory_stays_on_and_in_the_throwaway_home(tmp_path):
    # The user's notes folder and "memory off" are overridden: the example never writes there.
    mine = tmp_path / "my-notes"
    mine.mkdir()
    config = tmp_path / "mine.yaml"
    config.write_text(
        "providers: [{name: local, type: offline}]\n"
        "models: [{model: local/x}]\n"
        "agent: {model: local/x}\n"
        f"memory: {{enable: false, dir: '{mine}'}}\n"
    )
    done = _run_example(tmp_path, "--config", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "PASS"
    assert list(mine.iterdir()) == []
    assert not any(p.name.startswith("acp-e2e-memory-") for p in tmp_path.iterdir())


def test_the_basic_example_runs_clean_for_a_new_user_and_shows_the_memory_run(tmp_path):
    # As the issue tried it: a new home, the default config (memory on, memory_run as a
    # session/update), the official SDK client on the other end.
    home = tmp_path / "new-home"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("ACP_MEMORY_HOME", None)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "basic_session.py"), "--home", str(home), "hello"],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    assert 'You said: "hello"' in done.stdout
    assert "[memory run started: bg_1]" in done.stdout
    assert "[memory run finished: succeeded]" in done.stdout
    assert done.stdout.rstrip().endswith("[end_turn]")


def test_the_mcp_example_has_the_agent_use_an_http_and_a_stdio_server(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # its throw-away home lands here
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "mcp_servers.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "[web: greet: completed]" in lines and "[local: greet: completed]" in lines
    assert "hello Ada, from the http server" in lines
    assert "hello Ada, from the stdio server" in lines
    assert lines[-1] == "PASS: both servers' tools were used"
    assert "Traceback" not in done.stderr, done.stderr


def _closed_port() -> int:
    with socket.socket() as sock:  # bound, never listening: a connection is refused
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (
            "providers: [{{name: dead, type: openai, api_base: 'http://127.0.0.1:{port}/v1', "
            "api_key: k}}]\nmodels: [{{model: dead/m}}]\n"
            "agent: {{model: dead/m, llm_retry_max: 0}}\n",
            "connection failed",
        ),
        ("agent: {{max_turns: lots}}\n", "agent.max_turns"),
    ],
    ids=["unreachable model", "config the agent refuses"],
)
def test_a_failure_is_one_line_naming_it_and_exit_status_1(tmp_path, config, says):
    path = tmp_path / "mine.yaml"
    path.write_text(config.format(port=_closed_port()))
    done = _run_example(tmp_path, "--config", str(path))
    assert done.returncode == 1
    assert done.stdout == ""
    failure = [line for line in done.stderr.splitlines() if line.startswith("FAIL: ")]
    assert len(failure) == 1 and says in failure[0], done.stderr
    assert "Traceback" not in done.stderr
