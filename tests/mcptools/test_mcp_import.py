"""The MCP SDK is loaded only for a session that has servers: it costs an agent with none half
a second of start-up and some 25 MB."""

from __future__ import annotations

import subprocess
import sys


def test_the_agent_starts_without_loading_the_mcp_sdk() -> None:
    probe = ("import sys, acp_memory.acp.server, acp_memory.printmode.run; "
             "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"
