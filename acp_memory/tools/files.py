"""Read-only workspace tools: read a text file and list a folder; and the path rules every file
tool shares (paths relative to the cwd or absolute; outside the workspace, the cwd and the
session's additional roots, only with permission)."""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from acp_memory.paths import resolves_inside
from acp_memory.tools.base import PermissionRequest, ToolContext, ToolError, ToolKind, ToolResult

_MAX_READ_BYTES = 256 * 1024


def real_path(ctx: ToolContext, raw: str) -> Path:
    """Where `raw` (relative to the cwd, or absolute) really is, symlinks followed."""
    try:
        return (ctx.cwd / raw).resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, an embedded NUL
        raise ToolError(f"{raw!r} is not a usable path ({exc})") from None


def workspace_roots(ctx: ToolContext) -> tuple[Path, ...]:
    """The real folders of the workspace: the cwd, then the session's additional roots."""
    return tuple(root.resolve() for root in (ctx.cwd, *ctx.roots))


def inside_workspace(ctx: ToolContext, path: Path) -> bool:
    return any(resolves_inside(path, root) for root in workspace_roots(ctx))


async def reachable(ctx: ToolContext, raw: str, verb: str) -> tuple[Path, bool]:
    """The real location of `raw` and whether it is inside the workspace; a path outside is
    refused unless the session's permission gate lets it through (it may ask the user)."""
    # Resolving walks the path's symlinks: off the event loop, like any other disk access.
    path, inside = await anyio.to_thread.run_sync(_locate, ctx, raw, abandon_on_cancel=True)
    if not inside:
        if ctx.permissions is None:
            raise ToolError(
                f"{raw!r} is outside the working directory {ctx.cwd}, and there is no one "
                "to ask for permission here"
            )
        await ctx.permissions.ensure(
            ctx, PermissionRequest("outside", str(path), f"{verb} {path} (outside the workspace)")
        )
    return path, inside


def _locate(ctx: ToolContext, raw: str) -> tuple[Path, bool]:
    path = real_path(ctx, raw)
    return path, inside_workspace(ctx, path)


class ReadFile:
    name = "read_file"
    description = (
        "Read a UTF-8 text file under the working directory (relative or absolute path; one "
        "outside it needs the user's permission)."
    )
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
        return [str(real_path(ctx, args["path"]))]

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        shown = args["path"]
        path, _ = await reachable(ctx, shown, "Read")
        # A worker thread the turn abandons on cancel: a slow disk or a network mount must not
        # stall the event loop that serves every other session.
        data = await anyio.to_thread.run_sync(
            read_head, path, _MAX_READ_BYTES + 1, shown, abandon_on_cancel=True
        )
        cut = len(data) > _MAX_READ_BYTES
        text = decode_text(data[:_MAX_READ_BYTES], shown, complete=not cut)
        # The disk read above keeps the bounds: a FIFO, a folder, a binary or a huge file
        # never reaches the editor.
        if not cut and (buffer := await editor_text(ctx, path, shown)) is not None:
            cut = len(buffer) > _MAX_READ_BYTES
            text = buffer[:_MAX_READ_BYTES]
        if cut:
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
        return [str(real_path(ctx, args.get("path") or "."))]

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        shown = args.get("path") or "."
        folder, _ = await reachable(ctx, shown, "List")
        lines = await anyio.to_thread.run_sync(_listing, folder, shown, abandon_on_cancel=True)
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


async def editor_text(ctx: ToolContext, path: Path, shown: str, verb: str = "read") -> str | None:
    """The editor's copy of a file, with the user's unsaved changes; None when it offers none."""
    editor = ctx.editor
    if editor is None or not editor.can_read_files:
        return None
    text = await editor.read_text_file(ctx.session_id, str(path))
    if "\x00" in text:
        raise ToolError(f"cannot {verb} {shown}: it is a binary file")
    return text


def decode_text(data: bytes, shown: str, *, complete: bool = True, verb: str = "read") -> str:
    """UTF-8 text, or ToolError for a binary file (a NUL byte, or bytes that are not UTF-8).

    With complete=False the data is a head cut anywhere: a character split by the cut is
    dropped rather than taken for binary data.
    """
    if b"\x00" in data:
        raise ToolError(f"cannot {verb} {shown}: it is a binary file")
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
    except UnicodeDecodeError:
        raise ToolError(f"cannot {verb} {shown}: it is a binary file (not UTF-8 text)") from None


def _listing(folder: Path, shown: str) -> list[str]:
    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
        return [p.name + ("/" if p.is_dir() else "") for p in entries]
    except OSError as exc:
        raise ToolError(f"cannot list {shown}: {exc.strerror}") from None
