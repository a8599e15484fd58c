"""`acp-memory -p` in a real process: exit codes, the three output formats, -c and --resume,
the memory console lines, permissions without an editor, and the wait for a memory run that
is still persisting when the turn ends."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakes.clock import FakeClock
from fakes.openai_server import FakeOpenAI
from fakes.script import error, stall, text
from runtime.test_memory_run import MemoryRoutedOpenAI
from wire_schema import WireChecker, validate_memory_run

from acp_memory.cli import main
from acp_memory.cli_parser import build_parser
from acp_memory.engine.events import AgentText, AgentThought, ToolCallFinished, ToolCallStarted
from acp_memory.engine.reply import Reply
from acp_memory.printmode.console import Console, memory_line
from acp_memory.printmode.memory import (
    EXIT_NOTICE_SECONDS,
    SETTLE_GRACE_SECONDS,
    MemoryWatch,
    changed_notes,
    found_nothing,
)
from acp_memory.printmode.output import JsonOutput, StreamJsonOutput, TextOutput
from acp_memory.runtime.memory_service import MEMORY_EXIT_WAIT_SECONDS
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import SessionStore
from acp_memory.tasks.records import TaskCost, TaskRecord

pytestmark = pytest.mark.anyio

WAIT = 60  # seconds: a bound on each process, never a delay
MEMORY_LINE = r"memory: recalled in \d+\.\ds \(task bg_1\)"
SAVED_LINE = r"memory: saved in \d+\.\ds \(task bg_1\)"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cli" / "cli_e2e_memory.py"


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stderr.splitlines()


async def print_mode(
    *args: str, home: Path, cwd: Path, stdin: str = "", merged: bool = False
) -> Done:
    """`python -m acp_memory --cwd CWD ARGS` to its end; `merged`: stderr into stdout's pipe
    (`2>&1`), Done.stderr then empty."""
    env = {**os.environ, "ACP_MEMORY_HOME": str(home)}
    env.pop("OPENAI_API_KEY", None)
    command = [sys.executable, "-m", "acp_memory", "--cwd", str(cwd), *args]
    stderr = subprocess.STDOUT if merged else subprocess.PIPE
    with anyio.fail_after(WAIT):
        done = await anyio.run_process(
            command, input=stdin.encode(), check=False, env=env, cwd=cwd, stderr=stderr
        )
    return Done(done.returncode, done.stdout.decode(), (done.stderr or b"").decode())


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def configure(home: Path, yaml_text: str) -> None:
    (home / "config.yaml").write_text(yaml_text)


def fake_model(server: FakeOpenAI, extra: str = "") -> str:
    """config.yaml: the main agent on the fake server, no retries, memory off."""
    return (
        "providers:\n"
        f"  - {{name: fake, type: openai, api_base: '{server.base_url}', api_key: k}}\n"
        "models: [{model: fake/m, max_tokens: 256}]\n"
        "agent: {model: fake/m, llm_retry_max: 0}\n" + extra
    )


def slow_memory(delay_ms: int, memory: str) -> str:
    """config.yaml: the main agent on the offline model, the memory run on a slow one."""
    return (
        "providers:\n"
        f"  - {{name: slow, type: offline, delay_ms: {delay_ms}}}\n"
        "models: [{model: offline/default}, {model: slow/default}]\n"
        "agent: {model: offline/default}\n"
        f"memory: {{enable: true, model: slow/default, {memory}}}\n"
    )


def result_of(done: Done) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return value


def bundle(home: Path, session_id: str) -> Path:
    return home / "sessions" / session_id


# Text output, exit 0.


@pytest.mark.subprocess
async def test_stdout_is_the_reply_alone_with_a_blank_line_between_messages(home, project):
    (project / "a.md").write_text("hello file\n")
    done = await print_mode(
        "-p", "-", home=home, cwd=project, stdin='/tool read_file {"path": "a.md"}\n'
    )
    assert done.code == 0, done.stderr
    assert done.stdout == (
        'Calling read_file {"path": "a.md"}.\n\nThe tool read_file returned:\nhello file\n'
    )
    # The tool call on stderr by its title, one line; never its internal id.
    assert "tool: Read a.md (completed)" in done.lines
    assert "offline_" not in done.stderr
    assert re.fullmatch(r"\[end_turn\] session sess_[0-9a-f]{24}", done.lines[-1])


@pytest.mark.subprocess
@pytest.mark.parametrize("fmt", ["text", "json", "stream-json"])
def test_a_reader_that_left_early_neither_fails_the_turn_nor_its_session(home, project, fmt):
    # `acp-memory -p ... | head -c 0`: the pipe's reader is gone before the first byte.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        env = {**os.environ, "ACP_MEMORY_HOME": str(home)}
        done = subprocess.run(
            [sys.executable, "-m", "acp_memory", "--cwd", str(project), "-p", "hi",
             "--output-format", fmt],
            stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.PIPE,
            env=env, cwd=project, timeout=WAIT, check=False,
        )
    finally:
        os.close(write_end)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "Broken pipe" not in stderr and "Traceback" not in stderr, stderr
    (session,) = (home / "sessions").iterdir()
    messages = json.loads((session / "messages.json").read_text())["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]


# Exit codes 1 to 4 and 130, each with one line on stderr.


@pytest.mark.subprocess
async def test_a_model_failure_exits_1_with_one_line(home, project):
    async with FakeOpenAI(error(500, "the model is down")) as server:
        configure(home, fake_model(server))
        done = await print_mode("-p", "hi", home=home, cwd=project)
    assert (done.code, done.stdout) == (1, "")
    assert len(done.lines) == 1
    assert re.fullmatch(r"acp-memory: .*500.*the model is down.*", done.lines[0])


@pytest.mark.subprocess
async def test_an_unknown_session_exits_2_with_one_line(home, project):
    done = await print_mode(
        "-p", "hi", "--resume", "sess_0123456789abcdef01234567", home=home, cwd=project
    )
    assert (done.code, done.stdout) == (2, "")
    assert done.stderr == (
        "acp-memory: --resume sess_0123456789abcdef01234567: no such session in "
        f"{home / 'sessions'}\n"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-p", "hi", "-c"], "acp-memory: -c: no session to continue in {cwd}; start one with -p"),
        (["-p", "hi", "--model", "ghost/x"], "acp-memory: model 'ghost/x' names provider 'ghost'"),
        (["-p", "-"], "acp-memory: -p: nothing to send: stdin was empty"),
        (["-p", " "], "acp-memory: -p: nothing to send: the prompt is empty"),
        (
            ["--yes", "--output-format", "json"],
            "acp-memory: --output-format, --yes: for print mode only; add -p TEXT",
        ),
        (["-p", "hi", "notes"], "acp-memory: -p runs one turn on its own; it does not go with"),
    ],
)
def test_a_usage_error_is_one_line_and_creates_nothing(
    tmp_path, monkeypatch, capsys, args, says
):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    home = tmp_path / "home"
    code = main(["--home", str(home), "--cwd", str(tmp_path), *args])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith(says.format(cwd=tmp_path)) and err.count("\n") == 1
    assert not (home / "sessions").exists() or not list((home / "sessions").iterdir())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--mode", "chat"], "argument --mode: invalid choice: 'chat'"),
        (
            ["-c", "--resume", "sess_0123456789abcdef01234567"],
            "argument --resume: not allowed with argument -c/--continue",
        ),
    ],
)
def test_a_bad_flag_is_one_line(capsys, args, says):
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["-p", "hi", *args])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"acp-memory: {says}") and err.endswith("(see acp-memory --help)\n")
    assert err.count("\n") == 1


@pytest.mark.subprocess
async def test_max_tokens_exits_3_and_keeps_the_partial_reply(home, project):
    async with FakeOpenAI(text("cut sho", finish="length")) as server:
        configure(home, fake_model(server))
        done = await print_mode("-p", "hi", home=home, cwd=project)
    assert (done.code, done.stdout) == (3, "cut sho\n")
    assert len(done.lines) == 1
    assert re.fullmatch(
        r"acp-memory: stopped: max_tokens: the reply reached the output limit of fake/m "
        r"\(session sess_[0-9a-f]{24}\)",
        done.lines[0],
    )


@pytest.mark.subprocess
async def test_max_turn_requests_exits_3(home, project):
    configure(home, "agent: {max_turns: 1}\n")
    done = await print_mode("-p", "/tool list_directory {}", home=home, cwd=project)
    assert done.code == 3
    assert re.fullmatch(
        r"acp-memory: stopped: max_turn_requests: agent.max_turns \(1\) reached "
        r"\(session sess_[0-9a-f]{24}\)",
        done.lines[-1],
    )


@pytest.mark.subprocess
async def test_a_refusal_exits_4(home, project):
    async with FakeOpenAI(text("I can't help with that.", finish="content_filter")) as server:
        configure(home, fake_model(server))
        done = await print_mode("-p", "hi", "--output-format", "json", home=home, cwd=project)
    assert done.code == 4
    assert result_of(done)["stopReason"] == "refusal"
    assert len(done.lines) == 1
    assert done.lines[0].startswith("acp-memory: stopped: refusal: the model refused to answer")


@pytest.mark.subprocess
async def test_ctrl_c_while_the_model_answers_exits_130_with_the_cancelled_result(home, project):
    from cli.test_terminal import Child

    async with FakeOpenAI(stall()) as server:
        configure(home, fake_model(server))
        args = ("--cwd", str(project), "-p", "hi", "--output-format", "json")
        with Child(*args, home=home, cwd=project) as child:
            with anyio.fail_after(WAIT):
                await server.wait_for_requests(1)
            code, stderr = await anyio.to_thread.run_sync(child.ctrl_c)
            stdout = await anyio.to_thread.run_sync(child.line)
    assert (code, stderr) == (130, "acp-memory: interrupted\n")
    result = json.loads(stdout)
    assert result["stopReason"] == "cancelled" and result["memory"] is None
    assert (result["is_error"], result["error"], result["exitCode"]) == (True, "interrupted", 130)


@pytest.mark.subprocess
async def test_a_blocking_hook_exits_4_naming_the_hook_and_its_reason(home, project):
    hook = "echo 'no secrets in prompts' >&2; exit 2"
    configure(
        home,
        "hooks:\n  UserPromptSubmit:\n    - hooks: [{type: command, command: " + json.dumps(hook)
        + "}]\n",
    )
    done = await print_mode("-p", "my password is hunter2", home=home, cwd=project)
    assert (done.code, done.stdout) == (4, "")  # the hook's words are no reply of the model
    assert done.lines == [
        # The command as typed, in single quotes, its own quotes left as they are.
        "acp-memory: blocked by UserPromptSubmit hook "
        "'echo 'no secrets in prompts' >&2; exit 2': no secrets in prompts"
    ]


# Every way print mode fails ends stdout with one result object in json and stream-json.


async def _failing(case: str, fmt: str, home: Path, project: Path) -> Done:
    args = ("--output-format", fmt)
    if case == "a model failure":
        async with FakeOpenAI(error(500, "the model is down")) as server:
            configure(home, fake_model(server))
            return await print_mode("-p", "hi", *args, home=home, cwd=project)
    if case == "max_tokens":
        async with FakeOpenAI(text("cut sho", finish="length")) as server:
            configure(home, fake_model(server))
            return await print_mode("-p", "hi", *args, home=home, cwd=project)
    if case == "a blocking hook":
        configure(home, "hooks: {UserPromptSubmit: [{hooks: [{type: command, command: exit 2}]}]}")
    elif case == "a bad config":
        configure(home, "agent: {max_turns: many}\n")
    elif case == "no such session":
        args += ("--resume", "sess_0123456789abcdef01234567")
    elif case == "a missing --cwd":
        args += ("--cwd", str(project / "gone"))  # the last --cwd is the one taken
    elif case == "-p with a command":
        args += ("doctor",)
    prompt = " " if case == "an empty prompt" else "hi"
    return await print_mode("-p", prompt, *args, home=home, cwd=project)


@pytest.mark.subprocess
@pytest.mark.parametrize("fmt", ["json", "stream-json"])
@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("a model failure", 1),
        ("max_tokens", 3),
        ("a blocking hook", 4),
        ("a bad config", 2),
        ("no such session", 2),
        ("a missing --cwd", 2),
        ("-p with a command", 2),
        ("an empty prompt", 2),
    ],
)
async def test_every_failure_ends_stdout_with_one_result_object(home, project, case, code, fmt):
    done = await _failing(case, fmt, home, project)
    assert done.code == code, done.stderr
    lines = done.stdout.splitlines()
    assert lines and (len(lines) == 1 or fmt == "stream-json"), done.stdout
    result = json.loads(lines[-1])
    assert result["type"] == "result"
    # The stderr line, without the program's name, and the exit code with its meaning.
    said = done.lines[-1].removeprefix("acp-memory: ")
    assert (result["is_error"], result["error"], result["exitCode"]) == (True, said, code)


# Output formats.


@pytest.mark.subprocess
async def test_json_prints_one_result_object(home, project):
    async with FakeOpenAI(text("Hello there", chunks=3).costing(40, 9, cached=25)) as server:
        configure(home, fake_model(server))
        done = await print_mode("-p", "hi", "--output-format", "json", home=home, cwd=project)
    assert done.code == 0, done.stderr
    (line,) = done.stdout.splitlines()
    result = json.loads(line)
    session_id = result.pop("sessionId")
    assert (bundle(home, session_id) / "session.json").is_file()
    assert result == {
        "type": "result",
        "result": "Hello there",
        "stopReason": "end_turn",
        # The numbers of the ACP prompt answer, cached tokens included.
        "usage": {"inputTokens": 40, "outputTokens": 9, "cachedReadTokens": 25,
                  "cachedWriteTokens": 0, "totalTokens": 49},
        "memory": None,
        "is_error": False,
        "error": None,
        "exitCode": 0,
    }


@pytest.mark.subprocess
async def test_stream_json_prints_each_update_as_it_happens_then_the_result(home, project):
    (project / "a.md").write_text("hello file\n")
    prompt = '/tool read_file {"path": "a.md"}'
    done = await print_mode("-p", prompt, "--output-format", "stream-json", home=home, cwd=project)
    assert done.code == 0, done.stderr
    *updates, last = [json.loads(line) for line in done.stdout.splitlines()]
    checker = WireChecker()
    for line in updates:
        assert line["type"] == "session_update" and set(line) == {"type", "sessionId", "update"}
        notification = {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": line["sessionId"], "update": line["update"]},
        }
        checker.saw_agent_line(json.dumps(notification).encode())
    checker.assert_clean()
    kinds = [u["update"]["sessionUpdate"] for u in updates]
    assert kinds[0] == "memory_run" and "tool_call" in kinds and "tool_call_update" in kinds, kinds
    runs = [u["update"] for u in updates if u["update"]["sessionUpdate"] == "memory_run"]
    assert [r["status"] for r in runs] == ["started", "finished"]
    finished = runs[-1]
    cost = finished["_meta"]["acpMemory"]
    assert cost["modelCalls"] > 0 and cost["inputTokens"] > 0
    # After each of the main agent's answers, its request's tokens in the offline model's window.
    sizes = [u["update"] for u in updates if u["update"]["sessionUpdate"] == "usage_update"]
    assert sizes and {u["size"] for u in sizes} == {32768}
    assert last == {
        "type": "result",
        "result": (
            'Calling read_file {"path": "a.md"}.\n\nThe tool read_file returned:\nhello file\n'
        ),
        "stopReason": "end_turn",
        "sessionId": updates[0]["sessionId"],
        "usage": last["usage"],
        "memory": {
            "taskId": "bg_1",
            "status": "finished",
            "taskStatus": "succeeded",
            "durationMs": finished["durationMs"],
            "delivered": True,
            "reason": None,
            # What the run cost, apart from the turn's usage: its finished update's numbers.
            "usage": {**{k: v for k, v in cost.items() if k != "kind"},
                      "totalTokens": cost["inputTokens"] + cost["outputTokens"]},
        },
        "is_error": False,
        "error": None,
        "exitCode": 0,
    }
    assert last["usage"]["inputTokens"] > 0 and last["usage"]["outputTokens"] > 0


# The reference agent's memory script, on the offline model.


@pytest.mark.subprocess
async def test_a_fact_a_lasting_line_points_back_to_is_saved_and_a_fresh_session_recalls_it(
    home, project
):
    configure(home, "memory: {enable: true}\n")
    persist = (
        "Pick a fruit and state it as a single sentence that includes the codeword "
        "MEMFRUIT_7Q2X verbatim.\n"
        "After stating it, add one line explaining that this fact should be remembered.\n"
        "Avoid tools."
    )
    done = await print_mode("-p", persist, home=home, cwd=project)
    assert done.code == 0, done.stderr
    assert [p for p in (home / "memory").rglob("*.md") if "MEMFRUIT_7Q2X" in p.read_text()]
    asked = await print_mode("-p", "What is the fruit codeword?", home=home, cwd=project)
    assert asked.code == 0, asked.stderr
    assert "MEMFRUIT_7Q2X" in asked.stdout, asked.stdout


# -c and --resume.


@pytest.mark.subprocess
async def test_resume_opens_a_session_whose_id_the_user_chose(home, project):
    # As `acp --session-id example-acp-models` makes one.
    SessionStore(home / "sessions").create(
        cwd=str(project), model_id="offline/default", session_id="example-acp-models",
        messages=[TranscriptMessage(role="user", content="the code is 4711")],
    ).close()
    done = await print_mode("--resume", "example-acp-models", "-p", "and then",
                            "--output-format", "json", home=home, cwd=project)
    assert done.code == 0, done.stderr
    result = result_of(done)
    assert result["sessionId"] == "example-acp-models"
    assert 'Your previous message was: "the code is 4711"' in result["result"]


@pytest.mark.subprocess
async def test_continue_picks_the_latest_session_of_this_cwd_and_resume_the_one_named(
    home, project, tmp_path
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async def session_of(*args: str) -> tuple[str, str]:
        done = await print_mode(*args, "--output-format", "json", home=home, cwd=project)
        assert done.code == 0, done.stderr
        result = result_of(done)
        return result["sessionId"], result["result"]

    first, _ = await session_of("-p", "first words", "--mode", "ask")
    second, _ = await session_of("-p", "second words")
    # Newer, but in another folder.
    SessionStore(home / "sessions").create(cwd=str(elsewhere), model_id="offline/default").close()
    continued, reply = await session_of("-c", "-p", "and then")
    assert continued == second
    assert 'Your previous message was: "second words"' in reply
    resumed, reply = await session_of("--resume", first, "-p", "back to first", "--mode", "plan")
    assert resumed == first
    assert 'Your previous message was: "first words"' in reply
    assert "This is message 2 of our conversation." in reply
    # --mode picked for a turn stays the session's, as a mode picked in an editor does.
    record = json.loads((bundle(home, first) / "session.json").read_text())
    assert (record["mode"], record["selectedModelId"]) == ("plan", "offline/default")
    # A memory run's child session is read-only.
    child = next((bundle(home, second) / "subagents").iterdir()).name
    done = await print_mode("-p", "hi", "--resume", child, home=home, cwd=project)
    assert (done.code, done.stdout) == (2, "")
    assert done.stderr == (
        f"acp-memory: --resume {child} is a child session that memory ran for {second}; "
        "it is read-only\n"
    )


# Permissions without an editor.


@pytest.mark.subprocess
async def test_ask_mode_denies_a_write_with_a_line_unless_yes(home, project):
    prompt = '/tool write_file {"path": "new.md", "content": "x"}'
    done = await print_mode("-p", prompt, home=home, cwd=project)
    assert done.code == 0, done.stderr
    assert not (project / "new.md").exists()
    assert (
        "acp-memory: denied: Write new.md needs permission (tools.permission_mode is ask); "
        "--yes allows it"
    ) in done.lines
    assert "tool: Write new.md (failed)" in done.lines
    # The model (the offline one repeats the tool's result) reads that nobody was asked.
    assert done.stdout.rstrip("\n").endswith(
        "\nError: not run: print mode asks nobody; pass --yes or set tools.permission_mode"
    ), done.stdout
    done = await print_mode("-p", prompt, "--yes", home=home, cwd=project)
    assert done.code == 0, done.stderr
    assert (project / "new.md").read_text() == "x"
    assert not any("denied" in line for line in done.lines)


@pytest.mark.subprocess
async def test_with_stderr_merged_into_stdout_a_console_line_never_splits_a_reply_line(
    home, project
):
    # The offline model's first message has no newline before its tool call, whose console
    # lines come while the reply is mid-line.
    prompt = '/tool write_file {"path": "new.md", "content": "x"}'
    merged = await print_mode("-p", prompt, home=home, cwd=project, merged=True)
    assert merged.code == 0, merged.stdout
    alone = await print_mode("-p", prompt, home=home, cwd=project)
    assert alone.code == 0, alone.stderr
    lines, reply = merged.stdout.splitlines(), alone.stdout.splitlines()
    # Every line of each stream stands whole: the reply's in its order, the console's apart.
    assert [line for line in lines if line in reply] == reply, merged.stdout
    console = [line for line in lines if line not in reply]
    assert len(console) == len(alone.lines), merged.stdout
    assert all(line.startswith(("acp-memory: ", "memory: ", "tool: ", "[end_turn] "))
               for line in console), merged.stdout
    assert 'Calling write_file {"path": "new.md", "content": "x"}.' in reply
    assert "tool: Write new.md (failed)" in console


@pytest.mark.subprocess
async def test_export_writes_where_the_command_line_says_and_an_empty_session_has_nothing(
    home, project, tmp_path
):
    done = await print_mode("-p", "/export", home=home, cwd=project)
    assert (done.code, done.stdout) == (0, "nothing to export\n"), done.stderr
    assert list(project.iterdir()) == []
    first = await print_mode("-p", "hello", "--output-format", "json", home=home, cwd=project)
    session_id = result_of(first)["sessionId"]
    # Outside the workspace, where a file tool would need a permission nobody is there to give.
    target = tmp_path / "outside" / "chat.md"
    done = await print_mode(
        "-p", f"/export {target}", "--resume", session_id, home=home, cwd=project
    )
    assert (done.code, done.stdout) == (0, f"Exported 2 messages to {target}.\n"), done.stderr
    assert not any("denied" in line for line in done.lines)
    assert target.read_text().startswith("# hello\n")


# The memory console lines.


@pytest.mark.subprocess
async def test_a_recall_that_reached_the_turn_says_recalled(home, project):
    notes = home / "memory"
    notes.mkdir()
    (notes / "deploys.md").write_text("# Deploys\n\n- The deploy day is Thursday.\n")
    done = await print_mode("-p", "What is the deploy day?", home=home, cwd=project)
    assert done.code == 0, done.stderr
    assert "From memory:" in done.stdout and "Thursday" in done.stdout
    (line,) = [line for line in done.lines if line.startswith("memory:")]
    assert re.fullmatch(MEMORY_LINE, line)


@pytest.mark.subprocess
async def test_a_save_says_saved_and_a_search_with_no_hit_says_nothing_found(home, project):
    configure(home, "memory: {enable: true}\n")
    done = await print_mode("-p", "Remember that the kettle is blue.", home=home, cwd=project)
    assert done.code == 0, done.stderr
    assert re.fullmatch(SAVED_LINE, done.lines[0]), done.stderr
    done = await print_mode("-p", "What colour is the submarine?", home=home, cwd=project)
    assert done.code == 0, done.stderr
    assert re.fullmatch(r"memory: nothing found in \d+\.\ds \(task bg_1\)", done.lines[0])
    # A forget with no note to forget found nothing either: it recalled nothing.
    done = await print_mode("-p", "Forget the note about bananas.", home=home, cwd=project)
    assert done.code == 0, done.stderr
    assert re.fullmatch(r"memory: nothing found in \d+\.\ds \(task bg_1\)", done.lines[0])


@pytest.mark.subprocess
async def test_a_failed_memory_model_says_failed_with_the_providers_words(home, project):
    async with MemoryRoutedOpenAI() as server:
        server.child = [error(402, "subscription expired")]
        server.script(text("Hello."))
        configure(home, fake_model(server, "memory: {enable: true}\n"))
        done = await print_mode("-p", "hello", home=home, cwd=project)
    assert done.code == 0, done.stderr
    (line,) = [line for line in done.lines if line.startswith("memory:")]
    assert re.fullmatch(
        r"memory: failed after \d+\.\ds \(task bg_1\) - 402 .*subscription expired", line
    )
    assert "Traceback" not in done.stderr and "WARNING" not in done.stderr


@pytest.mark.subprocess
async def test_a_memory_run_past_its_timeout_says_timed_out(home, project):
    configure(home, slow_memory(20_000, "timeout_seconds: 0.5"))
    done = await print_mode("-p", "hello", "--output-format", "json", home=home, cwd=project)
    assert done.code == 0, done.stderr
    assert re.fullmatch(r"memory: timed out after \d+\.\ds \(task bg_1\)", done.lines[0])
    memory = result_of(done)["memory"]
    assert (memory["status"], memory["taskStatus"]) == ("finished", "timed_out")
    assert memory["reason"] == "timed out after 0.5s"


# The wait for a running memory run before exit.


@pytest.mark.subprocess
async def test_the_process_waits_for_a_persist_still_running_when_the_turn_ends(home, project):
    # The turn does not wait for memory; each of the run's model calls takes 300 ms.
    configure(home, slow_memory(300, "wait_seconds: 0"))
    done = await print_mode(
        "-p", "Please remember that the release train leaves on Fridays.",
        "--output-format", "json",
        home=home, cwd=project,
    )
    assert done.code == 0, done.stderr
    result = result_of(done)
    assert "From memory:" not in result["result"]  # the report came too late for the turn
    assert re.fullmatch(SAVED_LINE, done.lines[0])  # too late for the turn, yet saved
    assert result["memory"] == {
        "taskId": "bg_1",
        "status": "finished",
        "taskStatus": "succeeded",
        "durationMs": result["memory"]["durationMs"],
        "delivered": False,
        "reason": None,
        "usage": result["memory"]["usage"],
    }
    # Finished after the turn, its cost still in the result, apart from the turn's usage.
    cost = result["memory"]["usage"]
    assert cost["modelCalls"] > 0 and cost["durationMs"] == result["memory"]["durationMs"]
    assert cost["totalTokens"] == cost["inputTokens"] + cost["outputTokens"] > 0
    notes = [p.read_text() for p in (home / "memory").glob("*.md")]
    assert any("release train leaves on Fridays" in n for n in notes)
    meta = bundle(home, result["sessionId"]) / "background" / "bg_1" / "meta.json"
    assert json.loads(meta.read_text())["status"] == "succeeded"


@pytest.mark.subprocess
async def test_ctrl_c_during_the_wait_stops_the_run_and_says_so(home, project):
    from cli.test_terminal import Child

    configure(home, slow_memory(20_000, "wait_seconds: 0"))
    args = ("--cwd", str(project), "-p", "Please remember that tea is green.")
    with Child(*args, home=home, cwd=project) as child:
        with anyio.fail_after(WAIT):
            while b"This is message 1" not in await anyio.to_thread.run_sync(child.line):
                pass
        code, stderr = await anyio.to_thread.run_sync(child.ctrl_c)
    assert code == 130
    stopped = re.fullmatch(
        r"memory: stopped after (\d+\.\d)s \(task bg_1\)\nacp-memory: interrupted\n", stderr
    )
    assert stopped is not None, stderr
    # At once: print mode does not give its run the exit wait a server gives its runs.
    assert float(stopped[1]) < MEMORY_EXIT_WAIT_SECONDS


# The example.


@pytest.mark.subprocess
async def test_the_cli_example_persists_then_recalls_from_disk_on_the_offline_model(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ACP_MEMORY_HOME", "OPENAI_API_KEY")}
    with anyio.fail_after(2 * WAIT):
        done = await anyio.run_process(
            [sys.executable, str(EXAMPLE), "--home", str(tmp_path / "home")],
            check=False, env=env, cwd=tmp_path,
        )
    stdout = done.stdout.decode()
    assert done.returncode == 0, stdout + done.stderr.decode()
    for check in (
        "ok: the fact is a note on disk",
        "ok: the answer carries the fact",
        "ok: stderr says the memory was recalled",
        "ok: task bg_1 is the memory run and succeeded",
    ):
        assert check in stdout.splitlines()
    assert stdout.splitlines()[-1] == "every check passed"


# In process: the console's wording, the reply's separators, the 15-second notice.


@pytest.mark.parametrize(
    ("update", "line"),
    [
        (
            {"status": "finished", "taskId": "bg_3", "taskStatus": "succeeded",
             "durationMs": 3210, "delivered": True},
            "memory: recalled in 3.2s (task bg_3)",
        ),
        (
            {"status": "finished", "taskId": "bg_3", "taskStatus": "succeeded",
             "durationMs": 3210, "delivered": False},
            "memory: finished in 3.2s, nothing reached this turn (task bg_3)",
        ),
        (
            {"status": "finished", "taskId": "bg_3", "taskStatus": "failed", "durationMs": 1200,
             "delivered": False, "reason": "402 Payment Required: subscription expired"},
            "memory: failed after 1.2s (task bg_3) - 402 Payment Required: subscription expired",
        ),
        (
            {"status": "skipped", "reason": "memory runs in flight for this session: 2 of 2",
             "_meta": {"acpMemory": {"kind": "turn"}}},
            "memory: skipped - memory runs in flight for this session: 2 of 2",
        ),
        (
            {"status": "finished", "taskId": "bg_3", "taskStatus": "timed_out",
             "durationMs": 300_000, "delivered": False, "reason": "timed out after 300s"},
            "memory: timed out after 300.0s (task bg_3)",
        ),
        (
            {"status": "finished", "taskId": "bg_3", "taskStatus": "stopped", "durationMs": 1200,
             "delivered": False, "reason": "stopped"},
            "memory: stopped after 1.2s (task bg_3)",
        ),
        ({"status": "started", "taskId": "bg_3", "childSessionId": "sess_x",
          "_meta": {"acpMemory": {"kind": "turn"}}}, None),
    ],
)
def test_each_memory_update_has_the_seeds_console_line(update, line):
    assert memory_line(update) == line


SUCCEEDED = {"status": "finished", "taskId": "bg_3", "taskStatus": "succeeded",
             "durationMs": 3210}


@pytest.mark.parametrize("delivered", [True, False])
def test_a_run_that_saved_or_found_nothing_says_so_whether_or_not_it_reached_the_turn(
    delivered,
):
    update = {**SUCCEEDED, "delivered": delivered}
    assert memory_line(update, "saved") == "memory: saved in 3.2s (task bg_3)"
    assert memory_line(update, "nothing found") == "memory: nothing found in 3.2s (task bg_3)"
    failed = {**update, "taskStatus": "failed", "reason": "boom"}
    assert memory_line(failed, "saved") == "memory: failed after 3.2s (task bg_3) - boom"


def _tool(name: str, is_error: bool | None = None, content: str = "...") -> TranscriptMessage:
    return TranscriptMessage(role="tool", name=name, content=content, is_error=is_error)


@pytest.mark.parametrize(
    ("looks", "nothing"),
    [
        ([("memory_search", None, "no matching notes for 'bananas' in global.")], True),
        ([("memory_list", None, "global:/ is empty (no notes or folders).")], True),
        ([("memory_read", True, "no note global:a.md")], True),
        ([("memory_search", None, "no matching notes for 'a' in global."),
          ("memory_read", None, "I like tea.")], False),
        ([("memory_search", None, "1 matching note for 'tea' in global (best first):")], False),
        ([], False),  # a run that never looked found nothing it could say
    ],
)
def test_a_run_found_nothing_only_when_every_look_came_back_empty(looks, nothing):
    assert found_nothing([_tool(*look) for look in looks]) is nothing


@pytest.mark.parametrize(
    ("tools", "changed"),
    [
        (["memory_search", "memory_save"], True),
        (["memory_delete"], True),
        (["memory_search", "memory_list", "memory_mkdir"], False),
        ([("memory_save", True)], False),  # a save that failed changed nothing
    ],
)
def test_a_run_changed_the_notes_only_by_a_save_or_a_delete_that_succeeded(tools, changed):
    messages = [_tool(*t) if isinstance(t, tuple) else _tool(t) for t in tools]
    assert changed_notes(messages) is changed


def test_the_reply_puts_one_blank_line_between_messages():
    reply = Reply()
    started = ToolCallStarted("call_1", "read_file", "read", {})
    finished = ToolCallFinished("call_1", "completed", "hello")
    pieces = [reply.add(AgentText("Looking")), reply.add(AgentText("."))]
    # Two tool calls in a row still make one separator; their events add no text.
    assert [reply.add(e) for e in (started, finished, started, finished)] == [""] * 4
    pieces += [reply.add(AgentText("Found ")), reply.add(AgentThought("hmm"))]
    pieces += [reply.add(AgentText("")), reply.add(AgentText("it.\n"))]
    reply.add(started)
    pieces.append(reply.add(AgentText("Done.")))
    assert [p for p in pieces if p] == ["Looking", ".", "\n\nFound ", "it.\n", "\nDone."]
    assert reply.text == "Looking.\n\nFound it.\n\nDone."


def test_a_tool_call_before_any_text_adds_no_separator():
    reply = Reply()
    reply.add(ToolCallStarted("call_1", "read_file", "read", {}))
    assert reply.add(AgentText("Found it.")) == "Found it."
    assert reply.text == "Found it."


def test_on_one_terminal_a_console_line_never_lands_mid_reply():
    out, err = _Lines(), _Lines()
    output = TextOutput(out)
    console = Console(err, terminal=True)
    console.before_line = output.break_line
    reply = Reply()
    output.text(reply.add(AgentText("Looking")))
    reply.add(ToolCallStarted("call_1", "Read a.md", "read", {}))
    console.status("tool: Read a.md")
    console.line("tool: Read a.md (completed)")
    console.clear_status()  # nothing left to clear
    output.text(reply.add(AgentText("Found it.")))
    console.memory({"status": "finished", "taskId": "bg_1", "taskStatus": "succeeded",
                    "durationMs": 1500, "delivered": True})
    output.end_reply()
    # The break before the tool line stands for the separator's first newline: one blank line.
    assert out.text == "Looking\n\nFound it.\n"
    assert err.text == (
        "\r\x1b[2K\x1b[2mtool: Read a.md…\x1b[0m"  # the status line ...
        "\r\x1b[2Ktool: Read a.md (completed)\n"  # ... replaced by the line
        "\x1b[2mmemory: recalled in 1.5s (task bg_1)\x1b[0m\n"
    )


STARTED = datetime.now(UTC)
CHILD = "sess_" + "c" * 24


def _stamp(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Task:
    """A memory run's task as the watch sees it, ended by the test."""

    def __init__(self) -> None:
        self.id = "bg_1"
        self.result: str | None = None
        self.done = anyio.Event()
        self.record = TaskRecord(
            id="bg_1", session_id="sess_p", kind="agent", status="running",
            started_at=_stamp(STARTED), timeout_seconds=300,
        )


class _Lines:
    """A stream that tells when something was written."""

    def __init__(self) -> None:
        self.text = ""
        self.wrote = anyio.Event()

    def write(self, text: str) -> int:
        self.text += text
        self.wrote.set()
        return len(text)

    def flush(self) -> None:
        return None


def _watch(task: _Task, output: Any, err: _Lines) -> MemoryWatch:
    """A watch over task with a plain (non-terminal) console writing to err."""
    return MemoryWatch("sess_p", Console(err, terminal=False), output, lambda _: task)


async def test_the_exit_wait_says_so_after_fifteen_seconds_and_ends_when_the_run_does():
    err, out = _Lines(), _Lines()
    task = _Task()
    watch = _watch(task, JsonOutput(out), err)
    await watch.notify({"status": "started", "taskId": "bg_1", "childSessionId": CHILD})
    clock = FakeClock()
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch.wait_before_exit, clock)
        with anyio.fail_after(10):
            notice, bound = await clock.until_pending(2)
        # The notice at 15 s; the wait itself bounded by the run's timeout plus a grace.
        assert notice == EXIT_NOTICE_SECONDS
        assert EXIT_NOTICE_SECONDS < bound <= 300 + SETTLE_GRACE_SECONDS
        clock.advance(EXIT_NOTICE_SECONDS - 0.1)
        await anyio.wait_all_tasks_blocked()
        assert err.text == ""  # quiet for the first 15 s
        clock.advance(0.1)
        with anyio.fail_after(10):
            await err.wrote.wait()
        assert err.text.startswith(
            "memory: waiting for the memory run to finish before exiting (task bg_1, at most "
        )
        task.record.status = "succeeded"
        task.record.finished_at = _stamp(STARTED + timedelta(seconds=20))
        task.done.set()
    assert err.text.splitlines()[-1] == (
        "memory: finished in 20.0s, nothing reached this turn (task bg_1)"
    )
    summary = watch.summary()
    assert summary is not None and summary["status"] == "finished"


@pytest.mark.parametrize(
    ("status", "error", "reason"),
    [
        ("succeeded", None, None),
        ("failed", "402 Payment Required: subscription expired",
         "402 Payment Required: subscription expired"),
        ("timed_out", None, "timed out after 300s"),
        ("stopped", "stopped: the agent stopped", "stopped"),
    ],
)
async def test_a_run_that_settles_after_the_turn_is_told_as_the_runner_tells_it(
    status, error, reason
):
    out = _Lines()
    task = _Task()
    watch = _watch(task, StreamJsonOutput(out), _Lines())
    await watch.notify({"status": "started", "taskId": "bg_1", "childSessionId": CHILD})
    task.record.status = status
    task.record.error = error
    task.record.finished_at = _stamp(STARTED + timedelta(seconds=2))
    task.record.cost = TaskCost(model_calls=2, input_tokens=300, output_tokens=40,
                                cached_read_tokens=100, duration_ms=2000)
    task.done.set()
    await watch.settle()
    finished = json.loads(out.text.splitlines()[-1])["update"]
    expected = {
        "sessionUpdate": "memory_run", "status": "finished", "taskId": "bg_1",
        "childSessionId": CHILD, "taskStatus": status, "durationMs": 2000, "delivered": False,
        "_meta": {"acpMemory": {"modelCalls": 2, "inputTokens": 300, "outputTokens": 40,
                                "cachedReadTokens": 100, "cachedWriteTokens": 0,
                                "durationMs": 2000, "kind": "turn"}},
    }
    if reason is not None:
        expected["reason"] = reason
    assert finished == expected
    validate_memory_run(finished, extension=False)
    await watch.settle()  # told once
    assert len(out.text.splitlines()) == 2
