"""Drive acp-memory the way an editor does, with the official ACP Python SDK.

    .venv/bin/python examples/acp/basic_session.py [--home DIR] [TEXT ...]

From the repository root, with the README's venv (`.venv/bin/python`: it has the packages
this needs; a bare `python` may not).

Starts `python -m acp_memory` on stdio, opens a session in the current folder, sends each TEXT
as a prompt (a default one otherwise), prints the streamed reply and a line for each memory
run, and exits. The SDK cannot parse a memory_run session update, so at initialize this client
asks for them as the `_acp_memory/memory_run` extension notification instead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from acp import connect_to_agent, text_block
from acp.schema import ClientCapabilities

# What this client handles: the extension notification, which the SDK hands to
# ext_notification without its leading underscore.
MEMORY_RUN_FORM = {"memoryRunUpdates": "ext_notification"}
MEMORY_RUN = "acp_memory/memory_run"


class Printer:
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if update.session_update == "agent_message_chunk":
            print(update.content.text, end="", flush=True)
        elif update.session_update == "tool_call":
            print(f"\n[tool] {update.title}", flush=True)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == MEMORY_RUN:
            status = params.get("status")
            detail = params.get("taskStatus") or params.get("reason") or params.get("taskId")
            print(f"\n[memory run {status}: {detail}]", flush=True)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def main(home: str | None, prompts: list[str]) -> None:
    env = {**os.environ, **({"ACP_MEMORY_HOME": home} if home else {})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_memory",
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    assert proc.stdin and proc.stdout
    conn = connect_to_agent(Printer(), proc.stdin, proc.stdout)
    await conn.initialize(
        protocol_version=1, client_capabilities=ClientCapabilities(field_meta=MEMORY_RUN_FORM)
    )
    session = await conn.new_session(cwd=str(Path.cwd()), mcp_servers=[])
    for text in prompts:
        print(f"> {text}")
        resp = await conn.prompt(session_id=session.session_id, prompt=[text_block(text)])
        print(f"\n[{resp.stop_reason}]\n")
    proc.stdin.close()
    await proc.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="acp-memory home folder (default: $ACP_MEMORY_HOME)")
    parser.add_argument("text", nargs="*", default=["Hello! What are you?"])
    args = parser.parse_args()
    asyncio.run(main(args.home, args.text))
