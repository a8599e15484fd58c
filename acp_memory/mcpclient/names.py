"""The name a model calls an MCP server's tool by: `mcp__<server>__<tool>`, as Claude Code
names them, within what providers accept in a function name."""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp__"
MAX_NAME = 64  # OpenAI's and Anthropic's limit on a function name
HASH_CHARS = 6
_OUTSIDE = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>`, each character outside [a-zA-Z0-9_-] made `_`; a name past 64
    characters is cut and ends with `_` and 6 hex digits of the whole name's SHA-256, so two
    long names that share their first 57 characters still differ."""
    whole = _OUTSIDE.sub("_", f"{PREFIX}{server}__{tool}")
    if len(whole) <= MAX_NAME:
        return whole
    digest = hashlib.sha256(whole.encode()).hexdigest()[:HASH_CHARS]
    return f"{whole[: MAX_NAME - HASH_CHARS - 1]}_{digest}"


def is_mcp_tool(name: str) -> bool:
    """Whether a tool name is an MCP server's (the main agent's alone)."""
    return name.startswith(PREFIX)
