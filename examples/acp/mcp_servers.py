"""An editor's MCP servers, over HTTP and over stdio, used by acp-memory's agent.

    .venv/bin/python examples/acp/mcp_servers.py

From the repository root, with the README's venv (`.venv/bin/python`: it has the packages
this needs; a bare `python` may not).

Starts tiny_mcp_server.py over streamable HTTP, then `python -m acp_memory` on stdio in a
throw-away home (the built-in offline model: no key, no network), and opens a session with two
servers in its `mcpServers`: the HTTP one and a stdio one (the same script, run by the agent).
A prompt of `/tool` lines makes the offline model call each server's `greet`; this client
allows each call when the agent asks, and checks that both answers came back.

With the official SDK, an HTTP server is an `HttpMcpServer` (type "http"): its
`McpServerHttp` carries no type, and `new_session` drops it without a word.
Exit status 0 when both servers answered, 1 with one line saying what went wrong.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from acp import RequestError, connect_to_agent, text_block
from acp.schema import AllowedOutcome, HttpMcpServer, McpServerStdio, RequestPermissionResponse

TINY_SERVER = Path(__file__).resolve().parent / "tiny_mcp_server.py"
PROMPT = '/tool mcp__web__greet {"name": "Ada"}\n/tool mcp__local__greet {"name": "Ada"}'
EXPECTED = ("hello Ada, from the http server", "hello Ada, from the stdio server")
BOUND_SECONDS = 120


class Client:
    """Prints what the agent streams and allows each tool call it asks about."""

    def __init__(self) -> None:
        self.reply: list[str] = []
        self.titles: dict[str, str] = {}
        self.message_id: str | None = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if update.session_update == "agent_message_chunk":
            if self.reply and update.message_id != self.message_id:
                self.reply.append("\n")  # another message of the turn
            self.message_id = update.message_id
            self.reply.append(update.content.text)
        elif update.session_update == "tool_call":
            self.titles[update.tool_call_id] = update.title
        elif update.session_update == "tool_call_update" and update.status:
            title = self.titles.get(update.tool_call_id, update.tool_call_id)
            print(f"[{title}: {update.status}]", flush=True)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        allow = next(o for o in options if o.kind == "allow_once")
        print(f"[allowed: {tool_call.title}]", flush=True)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        pass


async def session_with_servers(url: str, home: Path, project: Path) -> str:
    """One prompt in a session with both servers; the agent's answer."""
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "acp_memory", "acp",
        "--home", str(home), "--cwd", str(project), "--log-level", "warning",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert agent.stdin is not None and agent.stdout is not None
    client = Client()
    conn = connect_to_agent(client, agent.stdin, agent.stdout)
    try:
        await conn.initialize(protocol_version=1)
        servers = [
            HttpMcpServer(type="http", name="web", url=url, headers=[]),
            McpServerStdio(name="local", command=sys.executable, args=[str(TINY_SERVER)], env=[]),
        ]
        session = await conn.new_session(cwd=str(project), mcp_servers=servers)
        print(f"> {PROMPT}")
        resp = await conn.prompt(session_id=session.session_id, prompt=[text_block(PROMPT)])
        print("".join(client.reply))
        print(f"[{resp.stop_reason}]")
    finally:
        agent.stdin.close()
        await agent.wait()
        await conn.close()
    return "".join(client.reply)


async def run(folder: Path) -> list[str]:
    """What is missing from the answer (nothing when both servers answered)."""
    home, project = folder / "home", folder / "project"
    home.mkdir()
    project.mkdir()
    (home / "config.yaml").write_text("memory: {enable: false}\n")
    web = await asyncio.create_subprocess_exec(
        sys.executable, str(TINY_SERVER), "http", stdout=asyncio.subprocess.PIPE
    )
    assert web.stdout is not None
    try:
        url = (await web.stdout.readline()).decode().strip()
        if not url:
            return ["the HTTP server did not start"]
        print(f"HTTP server at {url}")
        answer = await session_with_servers(url, home, project)
    finally:
        web.terminate()
        await web.wait()
    return [f"no {expected!r} in the answer" for expected in EXPECTED if expected not in answer]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="acp-mcp-example-") as folder:
        try:
            missing = asyncio.run(asyncio.wait_for(run(Path(folder)), BOUND_SECONDS))
        except (RequestError, ConnectionError, OSError, TimeoutError) as exc:
            missing = [f"the agent: {exc or type(exc).__name__}"]
    if missing:
        print(f"FAIL: {'; '.join(missing)}", file=sys.stderr)
        return 1
    print("PASS: both servers' tools were used")
    return 0


if __name__ == "__main__":
    sys.exit(main())
