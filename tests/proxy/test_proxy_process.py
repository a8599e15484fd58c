"""`acp-memory proxy` as an editor starts it: a real process, the official SDK client on its
stdio, a real inner agent behind it."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from acp import RequestError, text_block
from harness import subprocess_agent

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

BOUND_S = 60  # generous: a loaded machine starts two Python processes per proxy

# An inner agent that dies in the middle of its first turn, saying why on stderr.
DYING_AGENT = """\
import json, os, sys

def answer(message, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\\n")
    sys.stdout.flush()

for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method == "initialize":
        answer(message, {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []})
    elif method == "session/new":
        answer(message, {"sessionId": "sess_dying"})
    elif method == "session/prompt":
        sys.stderr.write("inner: out of cheese\\n")
        sys.stderr.flush()
        os._exit(3)
"""


async def test_an_inner_agent_that_cannot_start_is_one_line_and_exit_2(tmp_path: Path):
    missing = tmp_path / "no-such-agent"
    with anyio.fail_after(BOUND_S):
        done = await anyio.run_process(
            [
                sys.executable,
                "-m",
                "acp_memory",
                "proxy",
                "--home",
                str(tmp_path / "home"),
                "--",
                str(missing),
                "--flag",
            ],
            check=False,
        )
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode().splitlines() == [
        f"acp-memory proxy: cannot start the inner agent {missing}: No such file or directory"
    ]


async def test_an_inner_agent_dying_mid_turn_fails_the_prompt_with_its_exit_and_last_line(
    tmp_path: Path,
):
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    script = tmp_path / "dying_agent.py"
    script.write_text(DYING_AGENT)
    async with subprocess_agent(home, "proxy", "--", sys.executable, str(script)) as ed:
        with anyio.fail_after(BOUND_S):
            await ed.conn.initialize(protocol_version=1)
            session = await ed.conn.new_session(cwd=str(project), mcp_servers=[])
            with pytest.raises(RequestError) as failed:
                await ed.conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
            assert ed.process is not None
            code = await ed.process.wait()  # the proxy exits by itself
    line = f"the inner agent {sys.executable} exited with code 3: inner: out of cheese"
    assert failed.value.code == -32603
    assert failed.value.args[0] == line
    assert code == 1
    stderr = ed.stderr.decode()
    assert "inner: out of cheese" in stderr.splitlines()  # passed through as it came


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (
            "proxy:\n  agent:\n    command: {missing}\n    args: [--flag]\n",
            "acp-memory proxy: cannot start the inner agent {missing}: No such file or directory",
        ),
        (
            "",
            "acp-memory proxy: no inner agent: name its command after `--` "
            "(acp-memory proxy -- COMMAND [ARGS...]) or set proxy.agent.command in the config",
        ),
    ],
    ids=["from-config", "none"],
)
async def test_without_a_command_the_proxy_starts_the_configs_agent_or_says_there_is_none(
    tmp_path: Path, config: str, says: str
):
    home, missing = tmp_path / "home", tmp_path / "no-such-agent"
    home.mkdir()
    (home / "config.yaml").write_text(config.format(missing=missing))
    with anyio.fail_after(BOUND_S):
        done = await anyio.run_process(
            [sys.executable, "-m", "acp_memory", "proxy", "--home", str(home)], check=False
        )
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [says.format(missing=missing)]
