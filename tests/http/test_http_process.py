"""`acp-memory http` as a real process: the end-to-end example on the offline model, and a
stop signal that lets a running persist finish before the process exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from httpkit import http_process

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

REPO = Path(__file__).resolve().parents[2]
# Slow enough that the persist is still running when the turn has answered.
CONFIG = """\
providers:
  - {name: offline, type: offline, delay_ms: 400}
memory: {enable: true, wait_seconds: 0}
"""


def test_the_http_e2e_example_passes_on_the_offline_model(tmp_path):
    example = REPO / "examples" / "httpserver" / "http_e2e_memory.py"
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # its throw-away home lands here
    env.pop("ACP_MEMORY_E2E_CONFIG", None)
    proc = subprocess.run(
        [sys.executable, str(example), "--timeout", "60"],
        capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "PASS"
    assert "memory task row bg_1: system, agent 'memory', succeeded" in proc.stdout


async def test_ctrl_c_lets_the_running_persist_finish_then_exits_130(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    home.mkdir()
    (home / "config.yaml").write_text(CONFIG)
    async with http_process(home, project) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            sid = (await client.post("/coddy/sessions", json={"cwd": str(project)})).json()["id"]
            fact = "remember that my favourite colour is teal"
            answer = await client.post(f"/coddy/sessions/{sid}/prompt", json={"text": fact})
            assert answer.json()["stopReason"] == "end_turn"
            (task,) = (await client.get(f"/coddy/sessions/{sid}/background-tasks")).json()["tasks"]
        assert task["status"] == "running"
        server.proc.send_signal(signal.SIGINT)
        with anyio.fail_after(30):
            assert await server.proc.wait() == 130
            await server.wait_for("waiting up to 15s for 1 memory run")
    record = home / "sessions" / sid / "background" / task["id"] / "meta.json"
    assert json.loads(record.read_text())["status"] == "succeeded", server.stderr
    notes = [p.read_text() for p in (home / "memory").rglob("*.md")]
    assert any("teal" in note for note in notes), notes
