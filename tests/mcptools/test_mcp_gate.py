"""The permission gate for MCP tools without an editor to ask (print mode, HTTP): asked in
ask and accept_edits, never in bypass, never for an allowlisted tool, always naming the way
out."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_memory.config.models import ToolsConfig
from acp_memory.tools.base import PermissionRequest, ToolContext, ToolError
from acp_memory.tools.permissions import GRANTS_FILE, PermissionGate

pytestmark = pytest.mark.anyio

REQUEST = PermissionRequest("mcp", "mcp__gh__create_issue", "Call mcp__gh__create_issue", {})


def gate(tmp_path: Path, **tools: object) -> tuple[PermissionGate, ToolContext]:
    settings = ToolsConfig.model_validate(tools)
    ctx = ToolContext("s1", tmp_path, "agent")
    return PermissionGate(settings, tmp_path / GRANTS_FILE, None), ctx


@pytest.mark.parametrize("mode", ["ask", "accept_edits"])
async def test_an_mcp_call_asks_in_ask_and_accept_edits_and_names_the_allowlist(tmp_path, mode):
    permissions, ctx = gate(tmp_path, permission_mode=mode)
    with pytest.raises(ToolError) as err:
        await permissions.ensure(ctx, REQUEST)
    assert "add mcp__gh__create_issue to tools.mcp_allowlist" in str(err.value)


async def test_bypass_and_the_allowlist_let_an_mcp_call_through(tmp_path):
    permissions, ctx = gate(tmp_path, permission_mode="bypass")
    await permissions.ensure(ctx, REQUEST)
    permissions, ctx = gate(tmp_path, mcp_allowlist=["mcp__gh__create_issue"])
    await permissions.ensure(ctx, REQUEST)
    # A whole name only: another tool of the same server still asks.
    other = PermissionRequest("mcp", "mcp__gh__delete_repo", "Call mcp__gh__delete_repo", {})
    with pytest.raises(ToolError):
        await permissions.ensure(ctx, other)
