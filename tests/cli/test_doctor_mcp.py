"""`doctor` lists config.yaml's MCP servers, secrets masked; `--online` starts each and counts
its tools, against the real MCP servers of fakes.mcp_servers."""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from cli.test_print_mode import print_mode
from fakes.mcp_servers import EXIT_MESSAGE, TOOL_NAMES, mcp_http_server, stdio_entry

from acp_memory.doctor import run_doctor
from acp_memory.mcpclient.stderr import SERVER_STDERR

SECRETS = (
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "s3cr3t-arg",
    "env-value-1",
    "pw-in-url",
    "q-token",
    "header-value",
)


def doctor(
    tmp_path: Path,
    servers: dict[str, object],
    timeout: float = 30,
    mcp_keys: dict[str, object] | None = None,
    **flags: object,
) -> int:
    path = tmp_path / "config.yaml"
    mcp = {"servers": servers, "startup_timeout_seconds": timeout, **(mcp_keys or {})}
    config = {"memory": {"enable": True}, "mcp": mcp}
    path.write_text(json.dumps(config))  # JSON is YAML: the block pastes as .mcp.json has it
    args = argparse.Namespace(
        home=str(tmp_path / "home"),
        config=str(path),
        sessions_dir=None,
        cwd=str(tmp_path),
        **flags,
    )
    return run_doctor(args)


def mcp_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if "MCP server" in line]


def test_doctor_lists_each_configured_server_with_its_secrets_masked(tmp_path, capfd):
    servers = {
        "files": {
            "command": sys.executable,
            "args": ["-y", "server", "--token", SECRETS[0], "--api-key=s3cr3t-arg", "/docs"],
            "env": {"FILES_KEY": "env-value-1"},
        },
        "github": {
            "type": "http",
            "url": "https://me:pw-in-url@api.example.com/mcp?key=q-token&plain",
            "headers": {"Authorization": "header-value"},
        },
        "events": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
    }
    assert doctor(tmp_path, servers) == 0
    out = capfd.readouterr().out
    assert mcp_lines(out) == [
        f"ok: MCP server files (stdio): {shlex.quote(sys.executable)} -y server --token *** "
        "--api-key=*** /docs; env FILES_KEY",
        "ok: MCP server github (http): https://me:***@api.example.com/mcp?key=***&plain; "
        "headers Authorization",
        "ok: MCP server events (sse): http://127.0.0.1:9/sse",
    ]
    assert not [secret for secret in SECRETS if secret in out]


def test_doctor_warns_of_each_server_whose_variables_are_unset(tmp_path, capfd, monkeypatch):
    monkeypatch.delenv("F2_UNSET_TOKEN", raising=False)
    monkeypatch.delenv("F2_UNSET_DIR", raising=False)
    monkeypatch.setenv("F2_SET_KEY", "value")
    servers = {
        "github": {
            "type": "http",
            "url": "https://api.example.com/mcp",
            "headers": {"Authorization": "Bearer ${F2_UNSET_TOKEN}", "X-Key": "${F2_SET_KEY}"},
        },
        "files": {"command": sys.executable, "args": ["${F2_UNSET_DIR}", "${F2_UNSET_TOKEN}"]},
        "fine": {"command": sys.executable, "env": {"KEY": "${F2_SET_KEY}"}},
    }
    assert doctor(tmp_path, servers) == 0  # a warning: the server may not need it
    warnings = [line for line in mcp_lines(capfd.readouterr().out) if line.startswith("warn")]
    assert warnings == [
        "warning: MCP server github: not set in the environment: ${F2_UNSET_TOKEN} "
        "(each expands to nothing)",
        "warning: MCP server files: not set in the environment: ${F2_UNSET_DIR}, "
        "${F2_UNSET_TOKEN} (each expands to nothing)",
    ]


def test_doctor_names_a_stdio_command_that_cannot_be_found_without_starting_it(tmp_path, capfd):
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n")  # not executable
    servers = {
        "here": {"command": sys.executable, "args": ["-c", "raise SystemExit(9)"]},
        "gone": {"command": "no-such-mcp-server-anywhere", "args": ["--stdio"]},
        "relative": {"command": "./bin/server"},
        "stale": {"command": str(script)},
        "elsewhere": {"command": "python3", "env": {"PATH": str(tmp_path)}},
        "web": {"url": "http://127.0.0.1:9/mcp"},
    }
    assert doctor(tmp_path, servers) == 1
    lines = mcp_lines(capfd.readouterr().out)
    levels = [line.partition(":")[0] for line in lines]
    assert levels == ["ok", "error", "error", "error", "error", "ok"], lines
    assert lines[1].endswith(
        "no-such-mcp-server-anywhere --stdio; cannot run no-such-mcp-server-anywhere: not on PATH"
    )
    assert lines[2].endswith("; cannot run ./bin/server: no such file")
    assert lines[3].endswith(f"; cannot run {script}: not executable")
    assert lines[4].endswith("; env PATH; cannot run python3: not on PATH")


def test_doctor_lists_a_projects_mcp_json_when_allowed_and_says_it_is_ignored_otherwise(
    tmp_path, capfd
):
    entry = {"command": sys.executable, "args": ["--api-key", "file-secret"]}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"repo": entry}}))
    assert doctor(tmp_path, {}) == 0
    ignored = capfd.readouterr().out
    assert mcp_lines(ignored) == [
        f"warning: {tmp_path / '.mcp.json'} is ignored: its MCP servers start only with "
        "mcp.project_file: allow"
    ]
    assert doctor(tmp_path, {}, mcp_keys={"project_file": "allow"}) == 0
    allowed = capfd.readouterr().out
    assert mcp_lines(allowed) == [
        f"ok: MCP server repo (stdio): {shlex.quote(sys.executable)} --api-key ***"
    ]
    assert ".mcp.json is ignored" not in allowed and "file-secret" not in allowed


def test_doctor_names_a_projects_mcp_json_it_cannot_use(tmp_path, capfd):
    (tmp_path / ".mcp.json").write_text("{not json")
    assert doctor(tmp_path, {}, mcp_keys={"project_file": "allow"}) == 1
    out = capfd.readouterr().out
    assert f"error: {tmp_path / '.mcp.json'}: not valid JSON: " in out
    assert "(its MCP servers are left out)" in out


def test_doctor_reads_mcp_servers_under_their_claude_code_name(tmp_path, capfd, monkeypatch):
    monkeypatch.delenv("F2_UNSET_TOKEN", raising=False)
    path = tmp_path / "config.yaml"
    entry = {"command": sys.executable, "args": ["${F2_UNSET_TOKEN}"]}
    path.write_text(json.dumps({"memory": {"enable": True}, "mcp": {"mcpServers": {"x": entry}}}))
    args = argparse.Namespace(
        home=str(tmp_path / "home"), config=str(path), sessions_dir=None, cwd=str(tmp_path)
    )
    assert run_doctor(args) == 0
    out = capfd.readouterr().out
    assert "unknown key" not in out
    assert mcp_lines(out) == [
        f"ok: MCP server x (stdio): {shlex.quote(sys.executable)} ''",
        "warning: MCP server x: not set in the environment: ${F2_UNSET_TOKEN} "
        "(each expands to nothing)",
    ]


def test_doctor_without_mcp_servers_says_nothing_of_them(tmp_path, capfd):
    assert doctor(tmp_path, {}) == 0
    assert mcp_lines(capfd.readouterr().out) == []


def test_doctor_online_starts_each_server_and_counts_its_tools(tmp_path, capfd):
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(mcp_http_server()) as web,
        portal.wrap_async_context_manager(mcp_http_server("sse")) as events,
    ):
        servers = {
            "local": stdio_entry(),
            "web": {"type": "http", "url": web.url},
            "events": {"type": "sse", "url": events.url},
        }
        code = doctor(tmp_path, servers, online=True)
    out = capfd.readouterr().out
    assert code == 0, out
    assert mcp_lines(out)[3:] == [
        f"ok: MCP server {name} started: {len(TOOL_NAMES)} tools" for name in servers
    ]


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (stdio_entry("exit"), "exited"),
        ({"command": "/nonexistent/mcp-server"}, "/nonexistent/mcp-server"),
    ],
)
def test_doctor_online_names_a_server_that_fails_to_start_and_exits_1(
    tmp_path, capfd, caplog, entry, reason
):
    caplog.set_level(logging.INFO, logger=SERVER_STDERR)
    code = doctor(tmp_path, {"good": stdio_entry(), "broken": entry}, online=True)
    captured = capfd.readouterr()
    online = mcp_lines(captured.out)[2:]
    assert code == 1
    assert online[0] == f"ok: MCP server good started: {len(TOOL_NAMES)} tools"
    assert len(online) == 2 and online[1].startswith("error: MCP server broken: ")
    assert reason in online[1] and "Traceback" not in captured.out + captured.err
    if entry == stdio_entry("exit"):
        # The server's own words are in the log under its name, not unprefixed on stderr.
        assert EXIT_MESSAGE not in captured.err
        assert f"mcp broken: {EXIT_MESSAGE}" in caplog.messages


@pytest.mark.anyio
@pytest.mark.subprocess
async def test_doctor_online_says_a_broken_server_once_and_its_stderr_only_at_debug(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    config = {"memory": {"enable": True}, "mcp": {"servers": {"broken": stdio_entry("exit")}}}
    (home / "config.yaml").write_text(json.dumps(config))
    plain = await print_mode("doctor", "--online", home=home, cwd=tmp_path)
    debug = await print_mode("doctor", "--online", "--log-level", "debug", home=home, cwd=tmp_path)
    assert plain.code == debug.code == 1, plain.stdout + plain.stderr
    assert (plain.stdout + plain.stderr).count("MCP server broken: ") == 1, plain
    assert EXIT_MESSAGE not in plain.stderr
    assert f"acp-memory: mcp broken: {EXIT_MESSAGE}" in debug.lines, debug.stderr


def test_doctor_online_gives_a_server_the_configured_start_timeout(tmp_path, capfd):
    code = doctor(tmp_path, {"silent": stdio_entry("stall")}, timeout=1, online=True)
    online = mcp_lines(capfd.readouterr().out)[1:]
    assert code == 1
    assert online == [
        "error: MCP server silent: did not start within 1 s (mcp.startup_timeout_seconds)"
    ]
