"""MCP servers' credentials never reach a file under the home: session.json keeps the editor's
servers masked as `doctor` shows them (arguments, URLs, env and headers), and neither the log
nor the terminal names a URL's token, at debug included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli.test_print_mode import configure, fake_model, print_mode
from engine.turnkit import fake_config, prompt, turn_agent
from fakes.mcp_servers import mcp_http_server, stdio_entry
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from mcptools.mcpkit import http_server, stdio_server, tool_results

pytestmark = pytest.mark.anyio

SECRETS = (
    "arg-secret-1", "arg-secret-2", "env-secret-3", "url-secret-4", "header-secret-5", "arg-6"
)


def files_holding_a_secret(home: Path) -> list[str]:
    """What the agent wrote under the home that names a secret (config.yaml is the user's)."""
    return [
        f"{path}: {secret}"
        for path in home.rglob("*")
        if path.is_file() and path != home / "config.yaml"
        for secret in SECRETS
        if secret.encode() in path.read_bytes()
    ]


async def test_the_editors_servers_are_kept_masked_in_session_json_after_new_and_load(paths):
    async with FakeOpenAI() as model, mcp_http_server() as web:
        model.script(
            tool_calls(call("mcp__local__echo", {"text": "on stdio"})),
            tool_calls(call("mcp__web__echo", {"text": "over http"})),
            text("Done."),
        )
        cfg = fake_config(model.base_url)
        cfg.tools.permission_mode = "bypass"
        local = stdio_server("local", LOCAL_KEY=SECRETS[2])
        local.args = [
            *local.args, "--api-key", SECRETS[0], f"--token={SECRETS[1]}", f"http://h/?k={SECRETS[5]}"
        ]
        remote = http_server(f"{web.url}?api_key={SECRETS[3]}", "web", Authorization=SECRETS[4])
        async with turn_agent(cfg, paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[local, remote])
            assert await prompt(ed, new.session_id, "use both") == "end_turn"
            await ed.conn.load_session(
                session_id=new.session_id, cwd=str(paths.cwd), mcp_servers=[local, remote]
            )
    assert tool_results(model.requests[2]) == ["echo: on stdio", "echo: over http"]
    assert web.headers[0]["authorization"] == SECRETS[4]
    record = json.loads((paths.sessions_dir / new.session_id / "session.json").read_text())
    stored_local, stored_web = record["mcpServers"]
    assert stored_local["args"][-4:] == ["--api-key", "***", "--token=***", "http://h/?k=***"]
    assert stored_local["env"] == [{"name": "LOCAL_KEY", "value": "***"}]
    assert stored_web["url"] == f"{web.url}?api_key=***"
    assert stored_web["headers"] == [{"name": "Authorization", "value": "***"}]
    assert files_holding_a_secret(paths.home) == []


@pytest.mark.subprocess
async def test_a_print_mode_run_at_debug_names_no_servers_token_on_stderr_or_in_the_log(
    tmp_path,
):
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    async with FakeOpenAI() as model, mcp_http_server() as web:
        model.script(tool_calls(call("mcp__web__echo", {"text": "hi"})), text("Echoed."))
        servers = {
            "web": {"url": f"{web.url}?api_key={SECRETS[3]}"},
            "local": stdio_entry(args=[*stdio_entry()["args"], "--api-key", SECRETS[0]]),
        }
        extra = f"mcp: {json.dumps({'servers': servers})}\nlogging: {{to_file: true}}\n"
        configure(home, fake_model(model, extra))
        done = await print_mode(
            "--log-level", "debug", "-p", "echo", "--yes", home=home, cwd=project
        )
    assert done.code == 0, done.stderr
    assert tool_results(model.requests[1]) == ["echo: hi"]
    assert "?api_key=***" in done.stderr  # the URL is in the debug log, its token masked
    assert not [secret for secret in SECRETS if secret in done.stderr]
    assert (home / "logs" / "acp-memory.log").is_file()
    assert files_holding_a_secret(home) == []
