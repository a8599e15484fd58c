from __future__ import annotations

import os
import subprocess
import sys

import pytest

from acp_memory.cli import build_parser


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
    assert {"acp", "demo", "http", "notes", "doctor"} <= set(sub.choices)


def test_doctor_passes_on_defaults(tmp_path):
    done = _run("doctor", home=tmp_path / "home")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 error(s)" in done.stdout


@pytest.mark.parametrize(
    ("yaml_text", "finding", "code"),
    [
        ("agent: {model: ghost/x}\n", "names no configured provider", 1),
        ("memory: {wait_seconds: soon}\n", "memory.wait_seconds", 1),
        ("agent: {modle: x}\n", "unknown key agent.modle", 0),
        ("models: [{model: nope}]\n", "not of the form", 1),
    ],
)
def test_doctor_reports_findings_and_exits_1_on_errors(tmp_path, yaml_text, finding, code):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml_text)
    done = _run("doctor", "--config", str(cfg), home=tmp_path / "home")
    assert finding in done.stdout
    assert done.returncode == code


def test_doctor_reports_an_unwritable_home(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    done = _run("doctor", "--home", str(blocker / "home"), home=tmp_path)
    assert done.returncode == 1 and "not writable" in done.stdout


def test_a_bad_config_stops_the_server_with_a_message_naming_the_key(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("memory: {keep_runs: many}\n")
    done = _run("acp", "--config", str(cfg), home=tmp_path, input="")
    assert done.returncode == 2 and "memory.keep_runs" in done.stderr


def test_print_mode_answers_on_stdout_and_logs_on_stderr(tmp_path):
    done = _run("-p", "hello print mode", home=tmp_path / "home")
    assert done.returncode == 0
    assert "hello print mode" in done.stdout and "offline model" in done.stdout
    assert "end_turn" in done.stderr


@pytest.mark.subprocess
def test_demo_runs_a_scripted_session_on_the_offline_model(tmp_path):
    done = _run("demo", home=tmp_path / "home", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "offline model" in done.stdout
    assert "session/new" in done.stdout and "replays" in done.stdout


def test_doctor_checks_the_sessions_folder_the_flag_names(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    done = _run("doctor", "--sessions-dir", str(blocker / "sessions"), home=tmp_path / "home")
    assert done.returncode == 1 and f"sessions folder {blocker / 'sessions'}" in done.stdout


def test_doctor_finds_a_key_under_the_providers_own_variable(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("providers: [{name: my-openai, type: openai}]\n")
    env_key = {"MY_OPENAI_API_KEY": "sk-x"}
    done = _run("doctor", "--config", str(cfg), home=tmp_path / "home", env_extra=env_key)
    assert "has no key" not in done.stdout
    done = _run("doctor", "--config", str(cfg), home=tmp_path / "home")
    assert "MY_OPENAI_API_KEY" in done.stdout
