"""A project's `.mcp.json` (Claude Code's file) with `mcp.project_file: allow`: its servers join
a session's, the editor's winning over the file's and the file's over the config's; left off
(the default), a cloned repository starts nothing."""

from __future__ import annotations

import json

import pytest
from engine.turnkit import fake_config, prompt, turn_agent
from fakes.mcp_servers import stdio_entry
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from mcptools.mcpkit import offered, stdio_server, tool_results
from mcptools.test_mcp_tools import bypass

from acp_memory.config.models import McpServerConfig

pytestmark = pytest.mark.anyio

WHO = call("mcp__shared__getenv", {"name": "WHO"})


async def test_the_editors_server_wins_over_the_project_files_which_wins_over_the_configs(paths):
    servers = {"shared": stdio_entry(env={"WHO": "file"})}
    (paths.cwd / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    async with FakeOpenAI() as model:
        model.script(*[tool_calls(WHO), text("ok")] * 3)
        cfg = bypass(fake_config(model.base_url))
        cfg.mcp.project_file = "allow"
        cfg.mcp.servers = {"shared": McpServerConfig(**stdio_entry(env={"WHO": "config"}))}
        async with turn_agent(cfg, paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            for editors in ([stdio_server("shared", WHO="editor")], [], None):
                if editors is None:  # a third session, the file no longer allowed
                    cfg.mcp.project_file = "off"
                sid = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=editors or [])
                assert await prompt(ed, sid.session_id, "who?") == "end_turn"
    said = [tool_results(model.requests[i]) for i in (1, 3, 5)]
    assert said == [["editor"], ["file"], ["config"]]


async def test_a_projects_mcp_json_starts_nothing_by_default(paths):
    servers = {"repo": stdio_entry()}
    (paths.cwd / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    async with FakeOpenAI() as model:
        model.script(text("ok"))
        cfg = bypass(fake_config(model.base_url))
        async with turn_agent(cfg, paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            sid = (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])).session_id
            assert await prompt(ed, sid, "hello") == "end_turn"
    assert cfg.mcp.project_file == "off"
    assert not [name for name in offered(model.requests[0]) if name.startswith("mcp__")]
