"""config.yaml's `mcp:` section and `tools.mcp_allowlist`: Claude Code's `.mcp.json` entries
paste over, ${VAR} expands, and a bad entry is one error naming its key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acp_memory.config import ConfigError, load_config, resolve_paths
from acp_memory.config.loader import unknown_keys
from acp_memory.mcpclient.configured import configured_specs, specs_from_config
from acp_memory.mcpclient.specs import ServerSpec

# A Claude Code .mcp.json's mcpServers, as `claude mcp add` writes it.
MCP_JSON = {
    "files": {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-filesystem", "${DOCS_DIR}"],
        "env": {"API_KEY": "${FILES_KEY}"},
    },
    "github": {
        "type": "http",
        "url": "https://api.example.com/mcp",
        "headers": {"Authorization": "Bearer ${GH_TOKEN}"},
    },
    "events": {"type": "sse", "url": "https://events.example.com/sse"},
    "local": {"type": "stdio", "command": "./server"},
}


def _load(tmp_path: Path, text: str):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text(text)
    return load_config(resolve_paths(home=str(home), cwd=str(tmp_path)))


def test_a_pasted_mcp_json_block_becomes_specs_with_variables_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCS_DIR", "/srv/docs")
    monkeypatch.setenv("FILES_KEY", "k-123")
    monkeypatch.setenv("GH_TOKEN", "ghp-secret")
    cfg = _load(tmp_path, f"mcp:\n  servers: {json.dumps(MCP_JSON)}\n")

    assert specs_from_config(cfg) == [
        ServerSpec(
            "files",
            "stdio",
            command="npx",
            args=("-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"),
            env={"API_KEY": "k-123"},
        ),
        ServerSpec(
            "github",
            "http",
            url="https://api.example.com/mcp",
            headers={"Authorization": "Bearer ghp-secret"},
        ),
        ServerSpec("events", "sse", url="https://events.example.com/sse"),
        ServerSpec("local", "stdio", command="./server"),
    ]
    assert unknown_keys(cfg) == []


def test_mcp_servers_may_be_named_mcpServers_as_in_a_pasted_claude_code_block(tmp_path):
    cfg = _load(tmp_path, f"mcp:\n  mcpServers: {json.dumps({'local': MCP_JSON['local']})}\n")
    assert specs_from_config(cfg) == [ServerSpec("local", "stdio", command="./server")]
    assert unknown_keys(cfg) == []


def test_servers_and_mcpServers_together_are_an_error(tmp_path):
    text = "mcp:\n  servers: {a: {command: x}}\n  mcpServers: {b: {command: y}}\n"
    with pytest.raises(ConfigError, match=r"mcp: .*both servers and mcpServers"):
        _load(tmp_path, text)


def test_an_entry_under_mcpServers_that_cannot_start_names_that_key(tmp_path):
    with pytest.raises(ConfigError, match=r"mcp\.mcpServers\.broken: .*needs a command"):
        _load(tmp_path, "mcp:\n  mcpServers:\n    broken: {args: [x]}\n")


def project_file(folder: Path, servers: object) -> None:
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


@pytest.mark.parametrize(("setting", "read"), [("", False), ("off", False), ("allow", True)])
def test_a_projects_mcp_json_is_read_only_with_project_file_allow(tmp_path, setting, read):
    project = tmp_path / "project"
    project.mkdir()
    project_file(project, {"docs": {"command": "docs-server"}})
    mcp = f"mcp: {{project_file: {setting}, servers: {{own: {{command: mine}}}}}}\n"
    cfg = _load(tmp_path, mcp if setting else "mcp: {servers: {own: {command: mine}}}\n")
    names = [spec.name for spec in configured_specs(cfg, project)]
    assert names == (["docs", "own"] if read else ["own"])


def test_the_project_files_server_wins_over_the_configs_of_the_same_name(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCS_TOKEN", "t-1")
    project_file(tmp_path, {"docs": {"url": "http://h/mcp", "headers": {"X": "${DOCS_TOKEN}"}}})
    cfg = _load(tmp_path, "mcp: {project_file: allow, servers: {docs: {command: mine}}}\n")
    assert configured_specs(cfg, tmp_path) == [
        ServerSpec("docs", "http", url="http://h/mcp", headers={"X": "t-1"})
    ]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "not valid JSON"),
        ('{"mcpServers": {"broken": {"args": []}}}', "mcpServers.broken: "),
        ("[]", "must be an object with mcpServers"),
    ],
)
def test_a_project_file_that_cannot_be_used_is_one_warning_and_left_out(
    tmp_path, caplog, content, says
):
    (tmp_path / ".mcp.json").write_text(content)
    cfg = _load(tmp_path, "mcp: {project_file: allow, servers: {own: {command: mine}}}\n")
    assert [spec.name for spec in configured_specs(cfg, tmp_path)] == ["own"]
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warning.startswith(f"{tmp_path / '.mcp.json'}: ") and says in warning, warning
    assert warning.endswith("(its MCP servers are left out)")


def test_a_url_without_a_type_is_streamable_http(tmp_path):
    cfg = _load(tmp_path, "mcp:\n  servers:\n    web: {url: 'http://127.0.0.1:9/mcp'}\n")
    assert [s.type for s in specs_from_config(cfg)] == ["http"]


def test_numbers_and_booleans_in_args_env_and_headers_are_the_text_yaml_read(tmp_path):
    entry = "{command: srv, args: [--port, 8080, 0.5], env: {DEBUG: true, N: 3, Q: false}}"
    cfg = _load(tmp_path, f"mcp:\n  servers:\n    local: {entry}\n")
    (spec,) = specs_from_config(cfg)
    assert spec.args == ("--port", "8080", "0.5")
    assert spec.env == {"DEBUG": "true", "N": "3", "Q": "false"}


def test_no_servers_and_a_thirty_second_start_timeout_by_default(tmp_path):
    cfg = _load(tmp_path, "agent: {}\n")
    assert specs_from_config(cfg) == []
    assert cfg.mcp.startup_timeout_seconds == 30
    assert cfg.tools.mcp_allowlist == []


@pytest.mark.parametrize(
    ("entry", "key", "says"),
    [
        ("{args: [x]}", "mcp.servers.broken", "needs a command"),
        ("{type: stdio, url: 'http://h/mcp'}", "mcp.servers.broken", "type stdio needs a command"),
        ("{type: http, command: srv}", "mcp.servers.broken", "type http needs a url"),
        ("{type: sse}", "mcp.servers.broken", "type sse needs a url"),
        ("{type: websocket, url: 'ws://h'}", "mcp.servers.broken.type", "'stdio', 'http' or 'sse'"),
        ("{command: a, url: 'http://h/mcp'}", "mcp.servers.broken", "set type"),
        ("{command: srv, args: run}", "mcp.servers.broken.args", "list"),
        (
            "{type: http, url: 'http://h', headers: [a]}",
            "mcp.servers.broken.headers",
            "must be a mapping",
        ),
    ],
)
def test_a_server_entry_that_cannot_start_is_an_error_naming_its_key(tmp_path, entry, key, says):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, f"mcp:\n  servers:\n    ok: {{command: srv}}\n    broken: {entry}\n")
    message = str(err.value)
    assert f"{key}: " in message and says in message, message
    assert "mcp.servers.ok" not in message and "\n" not in message


def test_a_start_timeout_must_be_positive(tmp_path):
    with pytest.raises(ConfigError, match=r"mcp\.startup_timeout_seconds"):
        _load(tmp_path, "mcp: {startup_timeout_seconds: 0}\n")


def test_an_unknown_key_in_a_server_entry_is_kept_for_the_doctor(tmp_path):
    cfg = _load(tmp_path, "mcp:\n  servers:\n    files: {command: srv, disabled: true}\n")
    assert unknown_keys(cfg) == ["mcp.servers.files.disabled"]


def test_the_mcp_allowlist_holds_whole_tool_names(tmp_path):
    long_cut = "mcp__" + "s" * 52 + "_0a1b2c"  # a 64-character name, cut with its hash
    cfg = _load(
        tmp_path, f"tools:\n  mcp_allowlist: [mcp__github__get_issue, mcp__a-b__c_d, {long_cut}]\n"
    )
    assert cfg.tools.mcp_allowlist == ["mcp__github__get_issue", "mcp__a-b__c_d", long_cut]


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("mcp__github", "names a server"),
        ("get_issue", "not an mcp__<server>__<tool> name"),
        ("mcp__github__*", "not an mcp__<server>__<tool> name"),
        ("mcp__my server__x", "not an mcp__<server>__<tool> name"),
    ],
)
def test_an_mcp_allowlist_entry_that_is_no_tool_name_is_an_error_naming_the_key(
    tmp_path, name, says
):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, f"tools:\n  mcp_allowlist: ['{name}']\n")
    assert "tools.mcp_allowlist: " in str(err.value) and says in str(err.value)
