from __future__ import annotations

import errno
import json
import logging
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import acp_memory.memory.cli
from acp_memory.cli import main
from acp_memory.cli_parser import build_parser
from acp_memory.config import resolve_paths
from acp_memory.doctor import check
from acp_memory.oserror import describe_os_error, os_error_text
from acp_memory.runtime.runner import SessionRunner


def _run(
    *args: str, home, timeout: float = 60, env_extra: dict[str, str] | None = None, **kw
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ACP_MEMORY_HOME": str(home), **(env_extra or {})}
    for name in ("OPENAI_API_KEY", "MY_OPENAI_API_KEY"):
        if name not in (env_extra or {}):
            env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "acp_memory", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        **kw,
    )


def _blocked(tmp_path: Path) -> Path:
    """A folder path that cannot be created, even by root: its parent is a regular file."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    return blocker / "home"


ENOTDIR = os.strerror(errno.ENOTDIR)


@pytest.mark.parametrize(
    "argv",
    [
        ["--home", "H", "doctor"],
        ["doctor", "--home", "H"],
        ["--home", "H", "acp"],
        ["acp", "--home", "H"],
    ],
)
def test_shared_flags_are_accepted_before_or_after_the_subcommand(argv):
    args = build_parser().parse_args(argv)
    assert args.home == "H"


def test_the_parser_lists_every_subcommand_of_the_design():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) == {"acp", "demo", "http", "notes", "doctor", "proxy"}


def test_the_proxys_inner_agent_keeps_its_own_flags_after_the_double_dash():
    args = build_parser().parse_args(["proxy", "--home", "H", "--", "npx", "--home", "-y"])
    assert args.home == "H"
    assert args.inner == ["--", "npx", "--home", "-y"]


def test_doctor_online_is_a_flag_that_defaults_to_off():
    assert build_parser().parse_args(["doctor"]).online is False
    assert build_parser().parse_args(["doctor", "--online"]).online is True


def test_doctor_passes_on_defaults(tmp_path):
    home = tmp_path / "home"
    done = _run("doctor", home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert f"ok: home {home} is writable" in lines
    assert lines[-1] == "0 error(s), 0 warning(s)"


@pytest.mark.parametrize(
    ("yaml_text", "finding", "code"),
    [
        ("agent: {model: ghost/x}\n", "error: agent.model: 'ghost/x' names no configured", 1),
        ("memory: {wait_seconds: soon}\n", "error: {cfg}: memory.wait_seconds: ", 1),
        ("agent: {modle: x}\n", "warning: unknown key agent.modle", 0),
        ("models: [{model: nope}]\n", "error: models[0].model: 'nope' is not of the form", 1),
    ],
)
def test_doctor_reports_findings_and_exits_1_on_errors(tmp_path, yaml_text, finding, code):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml_text)
    done = _run("doctor", "--config", str(cfg), home=tmp_path / "home")
    finding = finding.replace("{cfg}", str(cfg))
    assert any(line.startswith(finding) for line in done.stdout.splitlines()), done.stdout
    assert done.returncode == code


def test_doctor_reports_an_unwritable_home(tmp_path):
    home = _blocked(tmp_path)
    done = _run("doctor", "--home", str(home), home=tmp_path)
    assert done.returncode == 1
    assert f"error: home {home} is not writable: {ENOTDIR}" in done.stdout.splitlines()


@pytest.mark.parametrize("argv", [["-p", "hi"], ["notes"], ["demo"]])
def test_a_bad_config_stops_a_command_with_one_line_naming_the_key(tmp_path, argv):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("memory: {keep_runs: many}\n")
    done = _run(*argv, "--config", str(cfg), home=tmp_path, input="")
    assert done.returncode == 2
    line = rf"acp-memory: {re.escape(str(cfg))}: memory\.keep_runs: [^\n]+\n"
    assert re.fullmatch(line, done.stderr)


def test_print_mode_answers_on_stdout_and_logs_on_stderr(tmp_path):
    done = _run("-p", "hello print mode", home=tmp_path / "home")
    assert done.returncode == 0
    assert "hello print mode" in done.stdout and "offline model" in done.stdout
    assert done.stdout.endswith("\n")
    # A config-less run says which model it picked, has memory on: its console line (an
    # empty home has no note to recall), then the session.
    line = (
        r"acp-memory: no config file at [^\n]+: sessions run on offline/default \([^\n]+\)\n"
        r"memory: nothing found in \d+\.\ds \(task bg_1\)\n\[end_turn\] session sess_\w+\n"
    )
    assert re.fullmatch(line, done.stderr), done.stderr


def test_doctor_checks_the_sessions_folder_the_flag_names(tmp_path):
    sessions = _blocked(tmp_path).parent / "sessions"
    done = _run("doctor", "--sessions-dir", str(sessions), home=tmp_path / "home")
    assert done.returncode == 1
    assert f"error: sessions folder {sessions} is not writable: {ENOTDIR}" in done.stdout


def test_doctor_finds_a_key_under_the_providers_own_variable(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("providers: [{name: my-openai, type: openai}]\nmemory: {enable: true}\n")
    env_key = {"MY_OPENAI_API_KEY": "sk-x"}
    done = _run("doctor", "--config", str(cfg), home=tmp_path / "home", env_extra=env_key)
    assert done.stdout.splitlines()[-1] == "0 error(s), 0 warning(s)"
    done = _run("doctor", "--config", str(cfg), home=tmp_path / "home")
    warning = "warning: provider 'my-openai' has no key: set its api_key or $MY_OPENAI_API_KEY"
    assert warning in done.stdout.splitlines()


def test_the_home_env_file_gives_the_doctor_a_key(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("MY_OPENAI_API_KEY='sk-x'  # from the dashboard\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("providers: [{name: my-openai, type: openai}]\nmemory: {enable: true}\n")
    done = _run("doctor", "--config", str(cfg), home=home)
    assert done.stdout.splitlines()[-1] == "0 error(s), 0 warning(s)"


@pytest.mark.parametrize("argv", [["doctor"], ["-p", "hi"], ["notes"]])
def test_an_env_file_that_is_not_utf8_stops_a_command_with_one_line_naming_it(tmp_path, argv):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_bytes(b"KEY=caf\xe9\n")
    done = _run(*argv, "--cwd", str(tmp_path), home=home)
    assert (done.returncode, done.stdout) == (2, "")
    assert re.fullmatch(
        rf"acp-memory: {re.escape(str(home / '.env'))}: not UTF-8 text: [^\n]+\n", done.stderr
    )


# --cwd


@pytest.mark.parametrize(
    # `acp` answers the editor instead (tests/e2e: a bad --cwd names itself on session/new).
    "argv", [["-p", "hi"], ["notes"], ["notes", "list"], ["doctor"], ["demo"]]
)
@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_cwd_that_is_not_a_folder_is_refused_before_anything_is_done(tmp_path, argv, kind):
    cwd = tmp_path / "nowhere"
    if kind == "file":
        cwd.write_text("a file")
    home = tmp_path / "home"
    done = _run(*argv, "--cwd", str(cwd), home=home, input="")
    reason = os.strerror(errno.ENOENT) if kind == "missing" else "not a folder"
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"acp-memory: --cwd {cwd}: {reason}\n"
    assert not home.exists()


def test_a_relative_cwd_is_named_as_the_absolute_path_it_means(tmp_path):
    done = _run("notes", "--cwd", "gone", home=tmp_path / "home", cwd=tmp_path)
    assert done.stderr == f"acp-memory: --cwd {tmp_path / 'gone'}: {os.strerror(errno.ENOENT)}\n"


# Ordinary failures: one line, no traceback.


def test_print_mode_with_an_uncreatable_sessions_folder_says_so_in_one_line(tmp_path):
    home = _blocked(tmp_path)
    done = _run("-p", "hi", "--home", str(home), home=home)
    assert (done.returncode, done.stdout) == (1, "")
    sessions = re.escape(str(home / "sessions"))
    line = rf"acp-memory: cannot create the session bundle: {sessions}/sess_\w+: {ENOTDIR}\n"
    assert re.fullmatch(line, done.stderr)


def test_an_uncreatable_log_file_is_one_line_naming_it(tmp_path):
    home = _blocked(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("logging: {to_file: true}\n")
    done = _run("-p", "hi", "--home", str(home), "--config", str(cfg), home=home)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"acp-memory: cannot open the log file (logging.to_file): {home / 'logs'}: {ENOTDIR}\n"
    )


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("ghost/x", "model 'ghost/x' names provider 'ghost', which is not configured"),
        ("noslash", "model id 'noslash' is not of the form <provider>/<upstream model id>"),
    ],
)
def test_print_mode_with_a_bad_model_id_is_one_line_and_leaves_no_session(tmp_path, model, says):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"agent: {{model: {model}}}\n")
    home = tmp_path / "home"
    done = _run("-p", "hi", "--config", str(cfg), home=home)
    assert (done.returncode, done.stdout) == (2, "")
    assert re.fullmatch(rf"acp-memory: {re.escape(says)}[^\n]*\n", done.stderr)
    assert list((home / "sessions").glob("*")) == []


def test_print_mode_with_an_unreachable_provider_is_one_line_naming_it(tmp_path):
    # Bound but not listening: a connection to it is refused, and no one else can take the port.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        cfg = tmp_path / "c.yaml"
        cfg.write_text(
            "providers:\n"
            f"  - {{name: faraway, type: openai, api_base: 'http://127.0.0.1:{port}/v1', "
            "api_key: k}\n"
            "agent: {model: faraway/m, llm_retry_max: 0}\n"
        )
        done = _run("-p", "hi", "--config", str(cfg), home=tmp_path / "home")
    assert (done.returncode, done.stdout) == (1, "")
    assert re.fullmatch(r"acp-memory: faraway: connection failed: [^\n]+\n", done.stderr)


def test_an_os_error_escaping_a_command_is_one_line_and_a_debug_traceback(
    tmp_path, monkeypatch, capsys, caplog
):
    def fail(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/srv/notes/x.md")

    monkeypatch.setattr(acp_memory.memory.cli, "run_notes", fail)
    caplog.set_level(logging.DEBUG, logger="acp_memory.cli")
    code = main(["notes", "--home", str(tmp_path / "home"), "--cwd", str(tmp_path)])
    assert code == 1
    assert capsys.readouterr().err == (
        f"acp-memory: notes failed: /srv/notes/x.md: {os.strerror(errno.EACCES)}\n"
    )
    (record,) = [r for r in caplog.records if r.name == "acp_memory.cli"]
    assert record.levelno == logging.DEBUG and record.exc_info is not None


def test_a_bare_run_on_a_pipe_serves_with_nothing_on_stderr(tmp_path):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
    line = json.dumps({**initialize, "params": {"protocolVersion": 1}}) + "\n"
    done = _run("--log-level", "warning", home=tmp_path / "home", input=line)
    assert done.returncode == 0
    assert json.loads(done.stdout.splitlines()[0])["result"]["protocolVersion"] == 1
    assert done.stderr == ""


def test_an_os_error_names_both_paths_of_a_rename_then_the_reason():
    rename = OSError(errno.EXDEV, os.strerror(errno.EXDEV), "/a/x.tmp", None, "/b/x.md")
    assert describe_os_error("cannot save", rename) == (
        f"cannot save: /a/x.tmp: /b/x.md: {os.strerror(errno.EXDEV)}"
    )
    assert os_error_text(OSError("no path, no errno")) == "no path, no errno"


@pytest.mark.parametrize(("prompt", "warned"), [("x" * 10, False), ("x" * 11, True)])
def test_doctor_measures_additional_prompt_without_its_surrounding_blanks(
    tmp_path, prompt, warned
):
    cfg = tmp_path / "c.yaml"
    padded = json.dumps("  " + prompt + "\n\n")
    cfg.write_text(
        f"memory:\n  enable: true\n  additional_prompt_max_chars: 10\n"
        f"  additional_prompt: {padded}\n"
    )
    paths = resolve_paths(home=str(tmp_path / "home"), config=str(cfg), cwd=str(tmp_path))
    warnings = [f.text for f in check(paths, explicit=True) if f.level == "warning"]
    if warned:
        assert warnings == [
            "memory.additional_prompt is 11 characters, longer than additional_prompt_max_chars"
            " (10) and will be cut"
        ]
    else:
        assert warnings == []


def test_print_mode_with_a_session_it_cannot_save_is_one_line_said_once(
    tmp_path, monkeypatch, capsys, caplog
):
    async def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/x/messages.json")

    monkeypatch.setattr(SessionRunner, "run_turn", disk_full)
    code = main(["--home", str(tmp_path / "home"), "--cwd", str(tmp_path), "-p", "hi"])
    assert code == 1
    assert re.fullmatch(
        rf"acp-memory: session sess_\w+ cannot be saved: /x/messages.json: "
        rf"{os.strerror(errno.ENOSPC)}\n",
        capsys.readouterr().err,
    )
    # Its warning would say the same line again on print mode's stderr.
    assert not [r for r in caplog.records if r.name == "acp_memory.runtime.table"]


def doctor_findings(tmp_path: Path, yaml_text: str) -> list[str]:
    """Every finding of `doctor` on a config file of this text, as it prints them."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml_text)
    paths = resolve_paths(home=str(tmp_path / "home"), config=str(cfg), cwd=str(tmp_path))
    return [str(f) for f in check(paths, explicit=True)]


@pytest.mark.parametrize(
    ("yaml_text", "key", "line"),
    [
        ("memory: {enable: true}\n", None,
         "ok: new sessions use offline/default (the built-in offline model: no models are "
         "configured)"),
        ("models: [{model: offline/default}, {model: offline/second}]\n", None,
         "ok: new sessions use offline/default (the first of models[], as agent.model is "
         "empty)"),
        ("agent: {model: offline/second}\n", "sk-o", "ok: new sessions use offline/second "
         "(agent.model)"),
        ("agent: {model: auto}\n", "sk-o", "ok: new sessions use openai/gpt-4.1-mini "
         "(agent.model: auto; OPENAI_API_KEY is set)"),
        ("agent: {model: auto}\n", None, "ok: new sessions use offline/default (agent.model: "
         "auto; the built-in offline model; set OPENAI_API_KEY or ANTHROPIC_API_KEY for "
         "another)"),
    ],
)
def test_doctor_names_the_model_new_sessions_use_and_why(
    tmp_path, monkeypatch, yaml_text, key, line
):
    if key:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    assert line in doctor_findings(tmp_path, yaml_text)


def test_doctor_warns_of_a_memory_model_naming_no_model_but_not_of_the_offline_one(tmp_path):
    found = doctor_findings(
        tmp_path,
        "memory: {enable: true, model: offline/other, fallback_models: [offline/default]}\n",
    )
    assert [f for f in found if f.startswith("warning:")] == [
        "warning: memory.model 'offline/other' is not among models[]: memory runs use the "
        "session's model"
    ]


def test_doctor_warns_of_a_price_that_no_usage_update_can_carry(tmp_path):
    found = doctor_findings(tmp_path, (
        "providers: [{name: local, type: openai, api_base: 'http://127.0.0.1:9/v1'}]\n"
        "models:\n"
        "  - {model: local/qwen3, price: {input: 1, output: 1}}\n"
        "  - {model: local/sized, context_window: 8192, price: {input: 1, output: 1}}\n"
        "  - {model: local/free}\n"
    ))
    assert [f for f in found if ".price" in f] == [
        "warning: models[0].price is set but its context window is unknown: no usage_update, "
        "no cost"
    ]
