"""Read-only workspace tools: read a text file and list a folder under the session's cwd."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

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
        # A worker thread the turn abandons on cancel: a slow disk or a network mount must not
        # stall the event loop that serves every other session.
        data = await anyio.to_thread.run_sync(
            read_head, path, _MAX_READ_BYTES + 1, args["path"], abandon_on_cancel=True
        )
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
        lines = await anyio.to_thread.run_sync(
            _listing, folder, args.get("path") or ".", abandon_on_cancel=True
        )
        return ToolResult("\n".join(lines) or "(empty folder)", locations=[str(folder)])


def read_head(path: Path, limit: int, shown: str) -> bytes:
    """At most `limit` bytes of a regular file; ToolError for anything else (FIFO, device…)."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer would otherwise wait for one for ever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ToolError(f"cannot read {shown}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"cannot read {shown}: it is a folder (use list_directory)")
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"cannot read {shown}: not a regular file")
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit)
    except OSError as exc:
        raise ToolError(f"cannot read {shown}: {exc.strerror}") from None
    finally:
        os.close(fd)


def _listing(folder: Path, shown: str) -> list[str]:
    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
        return [p.name + ("/" if p.is_dir() else "") for p in entries]
    except OSError as exc:
        raise ToolError(f"cannot list {shown}: {exc.strerror}") from None
