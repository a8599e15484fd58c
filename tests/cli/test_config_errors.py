"""A config or flag that cannot be used: one line on stderr and exit 2, whatever the command;
and what `doctor` says about keys, variables and memory."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(
    *args: str, home: Path, env: dict[str, str] | None = None, input: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_memory", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "ACP_MEMORY_HOME": str(home), **(env or {})},
        input=input,
        timeout=60,
    )


def _home(tmp_path: Path, config: str | None = None) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    if config is not None:
        (home / "config.yaml").write_text(config)
    return home


def _wire(*messages: dict) -> str:
    return "".join(json.dumps({"jsonrpc": "2.0", **m}) + "\n" for m in messages)


INITIALIZE = {"id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


def test_acp_with_a_missing_cwd_answers_the_editor_then_exits_2_with_one_line(tmp_path):
    missing = tmp_path / "nope"
    new = {"id": 2, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}}
    done = _run("acp", "--cwd", str(missing), home=tmp_path / "home", input=_wire(INITIALIZE, new))
    reason = os.strerror(errno.ENOENT)
    assert done.returncode == 2
    assert done.stderr == f"acp-memory: --cwd {missing}: {reason}\n"
    init, refused = (json.loads(line) for line in done.stdout.splitlines())
    assert init["result"]["protocolVersion"] == 1
    assert refused["error"]["message"] == f"--cwd {missing}: {reason}"  # stderr's line


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ("agent: {max_turns: 3\nmemory: [\n", "not valid YAML at line 2, column 7: "),
        ("memory: 5\n", "memory: must be a mapping of keys (key: value), not 5"),
        ("x: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than 50 levels (line 1)"),
        ("a: &a 1\nb: [" + ", ".join(["*a"] * 101) + "]\n", "more than 100 YAML aliases"),
        ("#" * (1024 * 1024) + "\n", "larger than 1 MiB"),
    ],
    ids=["yaml", "scalar-section", "deep", "aliases", "size"],
)
def test_a_config_print_mode_cannot_use_is_one_line_and_exit_2(tmp_path, config, says):
    home = _home(tmp_path, config)
    done = _run("-p", "hi", "--cwd", str(tmp_path), home=home)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"acp-memory: {home / 'config.yaml'}: ")
    assert says in done.stderr


def test_a_yaml_alias_bomb_does_not_hang_print_mode(tmp_path):
    lines = ['l0: &l0 "lol"']
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 9)]
    home = _home(tmp_path, "\n".join(lines) + "\nlogging: {level: error}\n")
    done = _run("-p", "hi", "--cwd", str(tmp_path), home=home)
    assert done.returncode == 0, done.stderr
    assert "offline model" in done.stdout


def test_print_mode_says_an_unknown_key_in_one_plain_line(tmp_path):
    home = _home(tmp_path, "colour: blue\n")
    done = _run("-p", "hi", "--cwd", str(tmp_path), home=home)
    assert done.returncode == 0
    first = done.stderr.splitlines()[0]
    assert first == (
        "acp-memory: config: unknown key colour is ignored (acp-memory doctor lists them)"
    )


@pytest.mark.parametrize("level", ["warn", "WARN", "Warning"])
def test_log_level_warn_is_taken_as_warning(tmp_path, level):
    done = _run("-p", "hi", "--log-level", level, "--cwd", str(tmp_path), home=_home(tmp_path))
    assert done.returncode == 0, done.stderr


def test_print_mode_with_no_config_file_says_which_model_it_runs_on_once(tmp_path):
    home = tmp_path / "home"
    done = _run("-p", "hi", "--cwd", str(tmp_path), home=home)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "sessions run on" in line]
    assert said == [
        f"acp-memory: no config file at {home / 'config.yaml'}: sessions run on offline/default "
        "(the built-in offline model; set OPENAI_API_KEY or ANTHROPIC_API_KEY for another)"
    ]


# -- doctor -------------------------------------------------------------------------------


@pytest.mark.parametrize("base", ["", ', api_base: "http://127.0.0.1:9/v1"'])
def test_doctor_fails_on_the_default_models_provider_whose_key_variable_is_unset(
    tmp_path, base
):
    home = _home(
        tmp_path,
        f"providers:\n  - {{name: openai, type: openai{base}, api_key: \"${{NOPE_KEY}}\"}}\n"
        "models: [{model: openai/gpt-4.1-mini}]\nmemory: {enable: true}\n",
    )
    done = _run("doctor", home=home, env={"NOPE_KEY": ""})
    assert done.returncode == 1
    assert (
        "error: provider 'openai' has no key: its api_key names ${NOPE_KEY}, which is not set"
        in done.stdout.splitlines()
    )


def test_doctor_warns_about_an_unused_provider_without_its_key(tmp_path):
    home = _home(
        tmp_path,
        "providers:\n  - {name: spare, type: anthropic, api_key: \"${NOPE_KEY}\"}\n"
        "memory: {enable: true}\n",
    )
    done = _run("doctor", home=home)
    assert done.returncode == 0
    assert (
        "warning: provider 'spare' has no key: its api_key names ${NOPE_KEY}, which is not set"
        in done.stdout.splitlines()
    )


MEMORY_OFF = (
    "warning: memory is off (memory.enable is false): nothing is recalled or saved; set "
    "memory.enable: true to turn it on"
)


@pytest.mark.parametrize("config", ["", "agent: {max_turns: 9}\n", "memory: {enable: false}\n"])
def test_doctor_says_when_memory_is_off(tmp_path, config):
    done = _run("doctor", home=_home(tmp_path, config))
    assert done.returncode == 0
    assert MEMORY_OFF in done.stdout.splitlines()


def test_the_example_config_copied_as_it_suggests_keeps_memory_on(tmp_path):
    home = _home(tmp_path, (REPO / "config.example.yaml").read_text())
    done = _run("doctor", home=home)
    assert done.returncode == 0, done.stdout
    assert MEMORY_OFF not in done.stdout.splitlines()
    from acp_memory.config import load_config, resolve_paths

    assert load_config(resolve_paths(home=str(home))).memory.enable is True


@pytest.mark.parametrize(
    ("keys", "model"),
    [
        ({}, "offline/default"),
        ({"OPENAI_API_KEY": "sk-o"}, "openai/gpt-4.1-mini"),
        ({"ANTHROPIC_API_KEY": "sk-a"}, "anthropic/claude-sonnet-4-5"),
    ],
)
def test_doctor_with_no_config_file_names_the_model_a_run_would_pick(tmp_path, keys, model):
    home = tmp_path / "home"
    done = _run("doctor", home=home, env=keys)
    assert done.returncode == 0
    line = next(line for line in done.stdout.splitlines() if "no config file" in line)
    assert re.fullmatch(
        rf"ok: no config file at {re.escape(str(home / 'config.yaml'))}: sessions run on "
        rf"{re.escape(model)} \(.+\); memory on",
        line,
    )


def test_doctor_warns_of_a_project_root_linking_out_of_the_workspace(tmp_path):
    home = _home(tmp_path, "memory: {enable: true}\n")
    cwd, outside = tmp_path / "cwd", tmp_path / "outside"
    cwd.mkdir()
    outside.mkdir()
    (cwd / "memory").symlink_to(outside)
    done = _run("doctor", "--cwd", str(cwd), home=home)
    assert done.returncode == 0, done.stdout
    assert (
        f"warning: project root {cwd / 'memory'} links outside the workspace to {outside}; "
        "set memory.project_root_symlinks: allow"
    ) in done.stdout.splitlines()
