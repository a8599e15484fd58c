"""The editor on the other end of the connection, as tools see it: its files, its terminals
and its user, reached through requests the agent sends (fs/*, terminal/*,
session/request_permission)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from acp_memory.editor import TerminalExit, TerminalOutput
from acp_memory.jsonrpc.errors import RpcError
from acp_memory.tools.base import ToolError


class Requester(Protocol):
    async def request(self, method: str, params: Any) -> Any: ...


class AcpEditor:
    """The Editor of editor.py over one connection, with what initialize advertised."""

    def __init__(self, peer: Requester, capabilities: Mapping[str, Any] | None = None) -> None:
        self.peer = peer
        caps = capabilities if isinstance(capabilities, Mapping) else {}
        fs = caps.get("fs")
        fs = fs if isinstance(fs, Mapping) else {}
        # Only an explicit true counts: a client that omits a flag does not offer the method.
        self.can_read_files = fs.get("readTextFile") is True
        self.can_write_files = fs.get("writeTextFile") is True
        self.can_run_terminals = caps.get("terminal") is True
        self.user_is_the_command_line = False  # an editor's user answers its questions

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return await self.peer.request(method, params)
        except RpcError as exc:
            raise ToolError(f"the editor refused {method}: {exc.message or exc.code}") from None

    async def read_text_file(self, session_id: str, path: str) -> str:
        result = await self._call("fs/read_text_file", {"sessionId": session_id, "path": path})
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise ToolError("the editor answered fs/read_text_file without a text content")
        return content

    async def write_text_file(self, session_id: str, path: str, content: str) -> None:
        await self._call(
            "fs/write_text_file", {"sessionId": session_id, "path": path, "content": content}
        )

    async def request_permission(
        self, session_id: str, tool_call: Mapping[str, Any], options: Sequence[Mapping[str, str]]
    ) -> str | None:
        result = await self._call(
            "session/request_permission",
            {"sessionId": session_id, "toolCall": dict(tool_call), "options": list(options)},
        )
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if isinstance(outcome, dict):
            if outcome.get("outcome") == "cancelled":
                return None
            option_id = outcome.get("optionId")
            if outcome.get("outcome") == "selected" and isinstance(option_id, str):
                return option_id
        raise ToolError(f"the editor answered session/request_permission with {result!r}")

    async def create_terminal(
        self, session_id: str, command: str, cwd: str, output_byte_limit: int
    ) -> str:
        # terminal/create executes a program with arguments; a command line needs a shell.
        result = await self._call(
            "terminal/create",
            {
                "sessionId": session_id,
                "command": "sh",
                "args": ["-c", command],
                "cwd": cwd,
                "outputByteLimit": output_byte_limit,
            },
        )
        terminal_id = result.get("terminalId") if isinstance(result, dict) else None
        if not isinstance(terminal_id, str) or not terminal_id:
            raise ToolError("the editor answered terminal/create without a terminalId")
        return terminal_id

    async def terminal_output(self, session_id: str, terminal_id: str) -> TerminalOutput:
        result = await self._call(
            "terminal/output", {"sessionId": session_id, "terminalId": terminal_id}
        )
        if not isinstance(result, dict) or not isinstance(result.get("output"), str):
            raise ToolError("the editor answered terminal/output without an output")
        status = result.get("exitStatus")
        return TerminalOutput(
            result["output"],
            result.get("truncated") is True,
            _exit(status) if isinstance(status, dict) else None,
        )

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str) -> TerminalExit:
        result = await self._call(
            "terminal/wait_for_exit", {"sessionId": session_id, "terminalId": terminal_id}
        )
        return _exit(result if isinstance(result, dict) else {})

    async def kill_terminal(self, session_id: str, terminal_id: str) -> None:
        await self._call("terminal/kill", {"sessionId": session_id, "terminalId": terminal_id})

    async def release_terminal(self, session_id: str, terminal_id: str) -> None:
        await self._call("terminal/release", {"sessionId": session_id, "terminalId": terminal_id})


def _exit(status: Mapping[str, Any]) -> TerminalExit:
    code, signal = status.get("exitCode"), status.get("signal")
    return TerminalExit(
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        signal if isinstance(signal, str) else None,
    )
