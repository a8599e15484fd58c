"""SIGTERM and SIGINT stop a real agent process gracefully: a memory run in flight finishes
(its note is saved) before the process exits."""

from __future__ import annotations

import json
import signal

import anyio
import pytest
from acp import text_block
from harness import subprocess_agent
from runtime.test_memory_run import memory_updates

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

# Slow enough that the persist is still running when the turn has answered.
CONFIG = """\
providers:
  - {name: offline, type: offline, delay_ms: 400}
memory: {enable: true, wait_seconds: 0}
"""


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
async def test_a_stop_signal_lets_the_running_persist_finish_first(tmp_path, signum, code):
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    home.mkdir()
    (home / "config.yaml").write_text(CONFIG)
    async with subprocess_agent(home) as ed:
        sid = await ed.start_session(project)
        fact = "remember that my favourite colour is teal"
        resp = await ed.conn.prompt(session_id=sid, prompt=[text_block(fact)])
        assert resp.stop_reason == "end_turn"
        (started,) = [u for u in memory_updates(ed) if u["status"] == "started"]
        record_file = home / "sessions" / sid / "background" / started["taskId"] / "meta.json"
        assert json.loads(record_file.read_text())["status"] == "running"
        assert ed.process is not None
        ed.process.send_signal(signum)
        with anyio.fail_after(30):
            assert await ed.process.wait() == code
    assert json.loads(record_file.read_text())["status"] == "succeeded", ed.stderr.decode()
    notes = [p.read_text() for p in (home / "memory").rglob("*.md")]
    assert any("teal" in note for note in notes), notes
