"""`doctor` lists config.yaml's MCP servers, secrets masked; `--online` starts each and counts
its tools, against the real MCP servers of fakes.mcp_servers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from fakes.mcp_servers import EXIT_MESSAGE, TOOL_NAMES, mcp_http_server, stdio_entry

from acp_memory.doctor import run_doctor

SECRETS = (
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "s3cr3t-arg",
    "env-value-1",
    "pw-in-url",
    "q-token",
    "header-value",
)


def doctor(tmp_path: Path, servers: dict[str, object], timeout: float = 30, **flags: object) -> int:
    path = tmp_path / "config.yaml"
    mcp = {"servers": servers, "startup_timeout_seconds": timeout}
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
            "command": "npx",
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
        "ok: MCP server files (stdio): npx -y server --token *** --api-key=*** /docs; "
        "env FILES_KEY",
        "ok: MCP server github (http): https://me:[REDACTED:url_password]@api.example.com/mcp"
        "?key=***&plain; headers Authorization",
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
        "files": {"command": "srv", "args": ["${F2_UNSET_DIR}", "${F2_UNSET_TOKEN}"]},
        "fine": {"command": "srv", "env": {"KEY": "${F2_SET_KEY}"}},
    }
    assert doctor(tmp_path, servers) == 0  # a warning: the server may not need it
    warnings = [line for line in mcp_lines(capfd.readouterr().out) if line.startswith("warn")]
    assert warnings == [
        "warning: MCP server github: not set in the environment: ${F2_UNSET_TOKEN} "
        "(each expands to nothing)",
        "warning: MCP server files: not set in the environment: ${F2_UNSET_DIR}, "
        "${F2_UNSET_TOKEN} (each expands to nothing)",
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
    tmp_path, capfd, entry, reason
):
    code = doctor(tmp_path, {"good": stdio_entry(), "broken": entry}, online=True)
    captured = capfd.readouterr()
    online = mcp_lines(captured.out)[2:]
    assert code == 1
    assert online[0] == f"ok: MCP server good started: {len(TOOL_NAMES)} tools"
    assert len(online) == 2 and online[1].startswith("error: MCP server broken: ")
    assert reason in online[1] and "Traceback" not in captured.out + captured.err
    if entry == stdio_entry("exit"):
        assert EXIT_MESSAGE in captured.err  # the server's own words reach the user


def test_doctor_online_gives_a_server_the_configured_start_timeout(tmp_path, capfd):
    code = doctor(tmp_path, {"silent": stdio_entry("stall")}, timeout=1, online=True)
    online = mcp_lines(capfd.readouterr().out)[1:]
    assert code == 1
    assert online == [
        "error: MCP server silent: did not start within 1 s (mcp.startup_timeout_seconds)"
    ]
