from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from acp_memory.tools.base import ToolContext, ToolKind, ToolResult
from acp_memory.tools.files import ReadFile
from acp_memory.tools.registry import ToolRegistry

pytestmark = pytest.mark.anyio


class Exploding:
    name = "explode"
    description = "Always fails in an unexpected way."
    kind: ToolKind = "other"
    read_only = True
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

    def title(self, args: Mapping[str, Any]) -> str:
        return "Explode"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        raise RuntimeError("kaboom")


async def test_an_unexpected_tool_failure_is_a_tool_error_not_a_crash(tmp_path: Path):
    registry = ToolRegistry([Exploding()])
    result = await registry.for_mode("agent").execute(
        "explode", "{}", ToolContext("s", tmp_path, "agent")
    )
    assert result.is_error and "RuntimeError: kaboom" in result.text


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd"])
async def test_read_file_refuses_paths_outside_the_cwd_with_no_one_to_ask(tmp_path: Path, path):
    registry = ToolRegistry([ReadFile()])
    ctx = ToolContext("s", tmp_path, "ask")  # no permission gate: nobody can allow it
    result = await registry.for_mode("ask").execute("read_file", json.dumps({"path": path}), ctx)
    assert result.is_error and "outside the working directory" in result.text


@pytest.mark.parametrize("path", ["a\x00b", "loop"])
async def test_read_file_refuses_unusable_paths(tmp_path: Path, path: str):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    registry = ToolRegistry([ReadFile()])
    ctx = ToolContext("s", tmp_path, "ask")
    result = await registry.for_mode("ask").execute("read_file", json.dumps({"path": path}), ctx)
    assert result.is_error and "not a usable path" in result.text
