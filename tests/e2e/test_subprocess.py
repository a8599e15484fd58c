"""A real `python -m acp_memory` process, driven by the official ACP client over stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from acp import RequestError, text_block
from harness import subprocess_agent

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]


async def test_an_editor_session_over_stdio_survives_the_process(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    async with subprocess_agent(home) as ed:
        sid = await ed.start_session(project)
        resp = await ed.conn.prompt(session_id=sid, prompt=[text_block("ping over stdio")])
        assert resp.stop_reason == "end_turn"
        assert "ping over stdio" in ed.client.text(sid)
    async with subprocess_agent(home) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.load_session(session_id=sid, cwd=str(project), mcp_servers=[])
        assert ed.client.text(sid, "user_message_chunk") == "ping over stdio"
        assert "offline model" in ed.client.text(sid)


def _run_raw(tmp_path, payload: bytes, *args: str, timeout: float = 30):
    env = {**os.environ, "ACP_MEMORY_HOME": str(tmp_path / "home")}
    return subprocess.run(
        [sys.executable, "-m", "acp_memory", *args],
        input=payload,
        capture_output=True,
        env=env,
        timeout=timeout,
        cwd=tmp_path,
    )


def test_only_protocol_messages_reach_stdout_even_when_code_prints(tmp_path):
    # A sitecustomize-free way to make handler code print: a prompt template that the
    # engine reads is plain text, so instead we patch print into the offline provider.
    script = (
        "import builtins, sys, runpy\n"
        "import acp_memory.llm.offline.main_agent as off\n"
        "orig = off.compose_reply\n"
        "def noisy(msgs):\n"
        "    print('STRAY PRINT FROM A HANDLER')\n"
        "    import os; os.write(1, b'STRAY FD1 WRITE\\n')\n"
        "    return orig(msgs)\n"
        "off.compose_reply = noisy\n"
        "sys.argv = ['acp-memory', 'acp']\n"
        "runpy.run_module('acp_memory', run_name='__main__')\n"
    )
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(tmp_path), "mcpServers": []},
        },
    ]
    env = {**os.environ, "ACP_MEMORY_HOME": str(tmp_path / "home")}
    stderr_file = tmp_path / "stderr.log"
    with stderr_file.open("wb") as stderr_sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_sink,  # a file: logs can never fill a pipe nobody reads
            env=env,
        )
    assert proc.stdin and proc.stdout
    for msg in lines:
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
    proc.stdin.flush()
    out = [json.loads(proc.stdout.readline()) for _ in range(2)]
    sid = out[1]["result"]["sessionId"]
    prompt = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]},
    }
    proc.stdin.write(json.dumps(prompt).encode() + b"\n")
    proc.stdin.flush()
    # The input stays open until the turn has answered: its end would cancel the turn.
    stdout = []
    while not stdout or json.loads(stdout[-1]).get("id") != 3:
        line = proc.stdout.readline()
        assert line, "the agent exited before answering the prompt"
        stdout.append(line)
    rest, _ = proc.communicate(b"", timeout=30)
    stdout += rest.splitlines()
    stderr = stderr_file.read_bytes()
    for line in stdout:
        json.loads(line)  # every line is JSON-RPC
    assert not any(b"STRAY" in line for line in stdout)
    assert b"STRAY PRINT FROM A HANDLER" in stderr and b"STRAY FD1 WRITE" in stderr
    assert proc.returncode == 0


def test_closing_stdin_mid_turn_cancels_it_and_exits_zero(tmp_path):
    # A prompt that is still streaming when the input ends: the process must not hang.
    big = "w " * 200_000  # the offline model streams this back word by word
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
    ]
    env = {**os.environ, "ACP_MEMORY_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_memory"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # never a pipe nobody reads: 64 KB of logs would block it
        env=env,
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps(lines[0]).encode() + b"\n")
    proc.stdin.write(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": str(tmp_path), "mcpServers": []},
            }
        ).encode()
        + b"\n"
    )
    proc.stdin.flush()
    proc.stdout.readline()
    sid = json.loads(proc.stdout.readline())["result"]["sessionId"]
    prompt = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": big}]},
    }
    proc.stdin.write(json.dumps(prompt).encode() + b"\n")
    proc.stdin.flush()
    # The turn is under way at its first update (the commands update follows session/new).
    first_update = json.loads(proc.stdout.readline())
    while first_update["params"]["update"]["sessionUpdate"] == "available_commands_update":
        first_update = json.loads(proc.stdout.readline())
    assert first_update["method"] == "session/update"
    proc.stdin.close()
    stdout = proc.stdout.read()
    # No clock: a turn the end of input did not cancel would finish and say end_turn below.
    assert proc.wait(timeout=60) == 0
    answers = [json.loads(line) for line in stdout.splitlines()]
    final = [m for m in answers if m.get("id") == 3]
    assert final and final[0]["result"]["stopReason"] == "cancelled"
    stored = json.loads((tmp_path / "home" / "sessions" / sid / "messages.json").read_text())
    assert stored["messages"][0]["role"] == "user"


def test_memory_stays_bounded_under_an_oversized_line(tmp_path):
    payload = b"q" * (200 * 1024 * 1024) + b"\n"
    init = (
        json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
        ).encode()
        + b"\n"
    )
    script = (
        # VmHWM is this process's own peak; ru_maxrss would include the parent's at fork.
        "import sys, runpy, atexit, re\n"
        "atexit.register(lambda: sys.stderr.write('PEAK_KB=%s\\n' % re.search("
        "r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)))\n"
        "sys.argv = ['acp-memory']\n"
        "runpy.run_module('acp_memory', run_name='__main__')\n"
    )
    env = {**os.environ, "ACP_MEMORY_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=payload + init,
        capture_output=True,
        env=env,
        timeout=120,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[0]["error"]["code"] == -32600 and answers[1]["id"] == 1
    peak_kb = int(done.stderr.split(b"PEAK_KB=")[1].split()[0])
    assert peak_kb < 150 * 1024, f"peak RSS {peak_kb} KB for a 200 MB line"


async def test_a_bad_config_answers_initialize_then_names_the_problem_on_session_new(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("agent:\n  max_turns: many\n")
    async with subprocess_agent(home) as ed:
        init = await ed.conn.initialize(protocol_version=1)
        assert init.protocol_version == 1
        with pytest.raises(RequestError) as err:
            await ed.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
    assert "agent.max_turns" in str(err.value) and str(home / "config.yaml") in str(err.value)
    (said,) = ed.stderr.decode().splitlines()  # one line, the one the editor shows
    assert said == f"acp-memory: {err.value.args[0]}"


async def test_unknown_config_keys_are_logged_as_a_warning_at_start(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("agent:\n  max_turnz: 3\n")
    async with subprocess_agent(home) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
    assert b"WARNING" in ed.stderr and b"unknown key agent.max_turnz" in ed.stderr


async def test_a_bad_cwd_flag_answers_initialize_then_names_the_folder_on_session_new(tmp_path):
    missing = tmp_path / "nowhere"
    async with subprocess_agent(tmp_path / "home", "acp", "--cwd", str(missing)) as ed:
        await ed.conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as err:
            await ed.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
    assert f"--cwd {missing}: No such file or directory" in str(err.value)


def _acp_script(tmp_path, *flags: str, lines: list[dict]) -> subprocess.CompletedProcess[bytes]:
    """`acp-memory acp FLAGS` fed `lines` then end of input, as a harness script drives it."""
    env = {**os.environ, "ACP_MEMORY_HOME": str(tmp_path / "home")}
    return subprocess.run(
        [sys.executable, "-m", "acp_memory", "acp", *flags],
        input=b"".join(json.dumps(line).encode() + b"\n" for line in lines),
        capture_output=True, env=env, timeout=60, check=False,
    )


# The reference agent's model-selector script passes its own default, example-acp-models.
@pytest.mark.parametrize("sid", ["sess_00000000000000000000abcd", "example-acp-models"])
def test_a_harness_script_opens_its_session_id_without_mcp_servers_and_sees_its_history(
    tmp_path, sid
):
    from acp_memory.sessions.model import TranscriptMessage
    from acp_memory.sessions.store import SessionStore

    store = SessionStore(tmp_path / "home" / "sessions")
    store.create(
        cwd=str(tmp_path), model_id="offline/default", session_id=sid,
        messages=[TranscriptMessage(role="user", content="the code is 4711"),
                  TranscriptMessage(role="assistant", content="Noted.")],
    ).close()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    new = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path)}}
    done = _acp_script(tmp_path, "--session-id", sid, lines=[init, new])
    assert done.returncode == 0, done.stderr
    sent = [json.loads(line) for line in done.stdout.splitlines()]
    answer_at = next(i for i, m in enumerate(sent) if m.get("id") == 2)
    assert sent[answer_at]["result"]["sessionId"] == sid
    replayed = [m["params"]["update"] for m in sent[answer_at + 1 :]
                if m["params"]["update"]["sessionUpdate"] != "available_commands_update"]
    assert [(u["sessionUpdate"], u["content"]["text"]) for u in replayed] == [
        ("user_message_chunk", "the code is 4711"), ("agent_message_chunk", "Noted."),
    ]


@pytest.mark.parametrize("bad", [".hidden", "../../etc", "a b", "x" * 65])
def test_an_invalid_session_id_flag_is_one_clear_line_and_exit_2(tmp_path, bad):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    new = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path)}}
    done = _acp_script(tmp_path, "--session-id", bad, lines=[init, new])
    line = f"--session-id {bad!r}: not a session id"
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        f"acp-memory: {line} (1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit)"
    ]
    initialized, refused = (json.loads(m) for m in done.stdout.splitlines())
    assert initialized["result"]["protocolVersion"] == 1  # the editor still hears why
    assert line in refused["error"]["message"]
    assert not (tmp_path / "home" / "sessions").exists()
