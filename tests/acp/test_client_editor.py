"""The editor as tools reach it (AcpEditor): the capabilities initialize advertised, its
terminals, its permission prompt and its errors, over the wire to the official SDK client.
Every request the agent sends is checked against the ACP schema by the harness."""

from __future__ import annotations

from typing import Any

import pytest
from acp import RequestError
from acp.schema import (
    ClientCapabilities,
    CreateTerminalResponse,
    FileSystemCapabilities,
    KillTerminalResponse,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)
from harness import RecordingClient, in_process_agent

from acp_memory.acp.client import AcpEditor
from acp_memory.acp.server import build_agent
from acp_memory.editor import TerminalExit, TerminalOutput
from acp_memory.llm.registry import ProviderHub
from acp_memory.tools.base import ToolError
from acp_memory.tools.permissions import OPTIONS

pytestmark = pytest.mark.anyio


class TerminalClient(RecordingClient):
    """An editor with terminals: each runs nothing and answers what the test set."""

    def __init__(self) -> None:
        super().__init__()
        self.created: list[dict[str, Any]] = []
        self.calls: list[tuple[str, str]] = []

    async def create_terminal(self, session_id: str, command: str, **kwargs: Any) -> Any:
        if kwargs.get("args") == ["-c", "refuse"]:
            raise RequestError.invalid_params({"details": "no shell here"})
        self.created.append({"sessionId": session_id, "command": command, **kwargs})
        return CreateTerminalResponse(terminal_id="term_1")

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.calls.append(("output", terminal_id))
        return TerminalOutputResponse(
            output="hi\n", truncated=True, exit_status=TerminalExitStatus(exit_code=0)
        )

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        self.calls.append(("wait", terminal_id))
        return WaitForTerminalExitResponse(exit_code=None, signal="SIGTERM")

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.calls.append(("kill", terminal_id))
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.calls.append(("release", terminal_id))
        return ReleaseTerminalResponse()


def _caps(*, fs: bool = False, terminal: bool = False) -> ClientCapabilities:
    return ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=fs, write_text_file=False), terminal=terminal
    )


async def test_initialize_gives_the_tools_an_editor_with_what_the_client_advertised(cfg, paths):
    agent = build_agent(cfg, paths, ProviderHub(cfg))
    async with in_process_agent(cfg, paths, agent) as ed:
        await ed.conn.initialize(protocol_version=1, client_capabilities=_caps(fs=True))
        assert isinstance(agent.editor, AcpEditor)
        flags = (agent.editor.can_read_files, agent.editor.can_write_files)
        assert flags == (True, False) and not agent.editor.can_run_terminals
        advertised = agent.client_capabilities
        await ed.conn.initialize(protocol_version=1)  # an SDK client's defaults: nothing
        assert not agent.editor.can_read_files and not agent.editor.can_run_terminals
    assert advertised["fs"] == {"readTextFile": True}  # as the client sent it


async def test_terminal_requests_run_the_command_line_in_a_shell_and_read_the_answers(cfg, paths):
    agent = build_agent(cfg, paths, ProviderHub(cfg))
    client = TerminalClient()
    async with in_process_agent(cfg, paths, agent, client) as ed:
        await ed.conn.initialize(protocol_version=1, client_capabilities=_caps(terminal=True))
        sid = (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])).session_id
        editor = agent.editor
        assert editor is not None and editor.can_run_terminals
        command = "make test 2>&1 | tail -n 5"
        terminal = await editor.create_terminal(sid, command, str(paths.cwd), 4096)
        output = await editor.terminal_output(sid, terminal)
        exit_status = await editor.wait_for_terminal_exit(sid, terminal)
        await editor.kill_terminal(sid, terminal)
        await editor.release_terminal(sid, terminal)
        with pytest.raises(ToolError, match="the editor refused terminal/create: Invalid params"):
            await editor.create_terminal(sid, "refuse", str(paths.cwd), 10)
    assert terminal == "term_1"
    [created] = client.created
    assert created["command"] == "sh" and created["args"] == ["-c", command]
    assert (created["cwd"], created["output_byte_limit"]) == (str(paths.cwd), 4096)
    assert output == TerminalOutput("hi\n", True, TerminalExit(0))
    assert exit_status == TerminalExit(None, "SIGTERM")
    assert client.calls == [
        ("output", "term_1"),
        ("wait", "term_1"),
        ("kill", "term_1"),
        ("release", "term_1"),
    ]


async def test_a_permission_prompt_returns_the_pick_or_none_when_cancelled(cfg, paths):
    agent = build_agent(cfg, paths, ProviderHub(cfg))
    async with in_process_agent(cfg, paths, agent) as ed:
        ed.client.permission_answers = ["reject_always", None]
        await ed.conn.initialize(protocol_version=1)
        sid = (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])).session_id
        assert agent.editor is not None
        call = {"toolCallId": "call_1", "title": "Run ls", "kind": "execute", "status": "pending"}
        assert await agent.editor.request_permission(sid, call, OPTIONS) == "reject_always"
        assert await agent.editor.request_permission(sid, call, OPTIONS) is None
        with pytest.raises(ToolError, match="refused session/request_permission"):
            await agent.editor.request_permission(sid, call, OPTIONS)  # no answer scripted
