"""Read-only workspace tools: read a text file and list a folder under the session's cwd."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from acp_memory.paths import resolves_inside
from acp_memory.tools.base import ToolContext, ToolError, ToolKind, ToolResult

_MAX_READ_BYTES = 256 * 1024


def _inside(ctx: ToolContext, rel: str) -> Path:
    root = ctx.cwd.resolve()
    target = root / rel
    if not resolves_inside(target, root):
        raise ToolError(f"{rel!r} is outside the working directory {root} or not a usable path")
    return target.resolve()


class ReadFile:
    name = "read_file"
    description = "Read a UTF-8 text file under the working directory."
    kind: ToolKind = "read"
    read_only = True
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "path relative to the cwd"}},
        "required": ["path"],
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Read {args.get('path', '')}"

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
        return [str(_inside(ctx, args["path"]))]

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        path = _inside(ctx, args["path"])
        try:
            data = path.read_bytes()[: _MAX_READ_BYTES + 1]
        except OSError as exc:
            raise ToolError(f"cannot read {args['path']}: {exc.strerror}") from None
        text = data[:_MAX_READ_BYTES].decode("utf-8", errors="replace")
        if len(data) > _MAX_READ_BYTES:
            text += f"\n[truncated at {_MAX_READ_BYTES} bytes]"
        return ToolResult(text, locations=[str(path)])


class ListDirectory:
    name = "list_directory"
    description = "List one folder under the working directory (names, with / after folders)."
    kind: ToolKind = "read"
    read_only = True
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "folder relative to the cwd"}},
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        return f"List {args.get('path') or '.'}"

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
        return [str(_inside(ctx, args.get("path") or "."))]

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        folder = _inside(ctx, args.get("path") or ".")
        try:
            entries = sorted(folder.iterdir(), key=lambda p: p.name)
        except OSError as exc:
            raise ToolError(f"cannot list {args.get('path') or '.'}: {exc.strerror}") from None
        lines = [p.name + ("/" if p.is_dir() else "") for p in entries]
        return ToolResult("\n".join(lines) or "(empty folder)", locations=[str(folder)])
