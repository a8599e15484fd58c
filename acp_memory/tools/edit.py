"""Workspace-changing file tools: write_file and edit_file.

Both go through the editor (fs/read_text_file, fs/write_text_file) when it advertised them, so
the edit sees the user's unsaved buffer and the editor records it; else the local disk, written
atomically. A write inside the workspace (the cwd, the session's additional roots) asks the
permission gate for a "write", a path outside it for an "outside" permission. The change is
shown to the editor as a diff.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import anyio

from acp_memory.tools.base import (
    Diff,
    PermissionRequest,
    ToolContext,
    ToolError,
    ToolKind,
    ToolResult,
)
from acp_memory.tools.files import decode_text, editor_text, reachable, read_head, real_path

T = TypeVar("T")
# The largest file the tools will read whole to change it (the diff carries it twice).
MAX_EDIT_BYTES = 4 * 1024 * 1024


async def current_text(ctx: ToolContext, path: Path, shown: str, verb: str) -> str | None:
    """The file's text as the user sees it, or None when there is no such file.

    ToolError for a folder, a special file, a binary file or one past MAX_EDIT_BYTES: the disk
    is checked first even when the editor will answer, so those never reach it.
    """
    data = await anyio.to_thread.run_sync(_read_existing, path, shown, verb)
    if data is None:
        return None
    text = decode_text(data, shown, verb=verb)
    buffer = await editor_text(ctx, path, shown, verb)
    return text if buffer is None else buffer


async def put_text(ctx: ToolContext, path: Path, shown: str, text: str) -> None:
    """Write the whole file, creating its parent folders."""
    editor = ctx.editor
    if editor is not None and editor.can_write_files:
        await anyio.to_thread.run_sync(_make_parents, path, shown)
        await editor.write_text_file(ctx.session_id, str(path), text)
    else:
        await anyio.to_thread.run_sync(_write_local, path, shown, text.encode("utf-8"))


class WriteFile:
    name = "write_file"
    description = (
        "Create or replace a UTF-8 text file with the given content (parent folders are "
        "created). Path relative to the working directory, or absolute."
    )
    kind: ToolKind = "edit"
    read_only = False
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "path relative to the cwd"},
            "content": {"type": "string", "description": "the whole new content of the file"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Write {args.get('path', '')}"

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
        return [str(real_path(ctx, args["path"]))]

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        shown, content = args["path"], args["content"]
        if "\x00" in content:
            raise ToolError("content has a NUL character; write_file writes text files only")
        path, inside = await reachable(ctx, shown, "Write")
        old = await _checked_twice(
            ctx, path, inside, f"Write {shown}", lambda: current_text(ctx, path, shown, "write")
        )
        await put_text(ctx, path, shown, content)
        verb = "Created" if old is None else "Wrote"
        return ToolResult(
            f"{verb} {shown} ({len(content)} characters).",
            locations=[str(path)],
            content=[Diff(str(path), old, content)],
        )


class EditFile:
    name = "edit_file"
    description = (
        "Replace an exact piece of text in a file. old_text must occur exactly once (include "
        "surrounding lines to make it unique) unless replace_all is true; whitespace counts."
    )
    kind: ToolKind = "edit"
    read_only = False
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "path relative to the cwd"},
            "old_text": {"type": "string", "description": "the exact text to replace"},
            "new_text": {"type": "string", "description": "the text to put in its place"},
            "replace_all": {
                "type": "boolean",
                "description": "replace every occurrence (default: exactly one must exist)",
            },
        },
        "required": ["path", "old_text", "new_text"],
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Edit {args.get('path', '')}"

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
        return [str(real_path(ctx, args["path"]))]

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        shown, old_text, new_text = args["path"], args["old_text"], args["new_text"]
        if not old_text:
            raise ToolError("old_text is empty; to create or replace a whole file use write_file")
        if old_text == new_text:
            raise ToolError("old_text and new_text are the same; there is nothing to change")
        if "\x00" in new_text:
            raise ToolError("new_text has a NUL character; edit_file edits text files only")
        replace_all = args.get("replace_all") is True
        path, inside = await reachable(ctx, shown, "Edit")

        async def changed() -> tuple[str, str, int]:
            text = await current_text(ctx, path, shown, "edit")
            if text is None:
                raise ToolError(f"cannot edit {shown}: no such file (write_file creates files)")
            count = text.count(old_text)
            if count == 0:
                raise ToolError(
                    f"old_text was not found in {shown} (0 matches); read the file and copy "
                    "the text exactly, whitespace included"
                )
            if count > 1 and not replace_all:
                raise ToolError(
                    f"old_text occurs {count} times in {shown}; include more surrounding text "
                    "so that it matches once, or set replace_all"
                )
            return text, text.replace(old_text, new_text), count

        old, new, count = await _checked_twice(ctx, path, inside, f"Edit {shown}", changed)
        await put_text(ctx, path, shown, new)
        noun = "occurrence" if count == 1 else "occurrences"
        return ToolResult(
            f"Edited {shown}: replaced {count} {noun}.",
            locations=[str(path)],
            content=[Diff(str(path), old, new)],
        )


async def _checked_twice(
    ctx: ToolContext, path: Path, inside: bool, title: str, check: Callable[[], Awaitable[T]]
) -> T:
    """Check before asking (the user is never asked to allow a call that cannot work), then
    again after: the file may have changed while the user was deciding. A path outside the
    workspace was already allowed by reachable(); a write inside asks the gate for a "write"."""
    first = await check()
    if not inside:
        return first
    if ctx.permissions is None:
        raise ToolError(f"{title}: there is no permission gate to allow file writes here")
    await ctx.permissions.ensure(ctx, PermissionRequest("write", str(path), title))
    return await check()


def _read_existing(path: Path, shown: str, verb: str) -> bytes | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ToolError(f"cannot {verb} {shown}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"cannot {verb} {shown}: a folder, not a file")
    if st.st_size > MAX_EDIT_BYTES:
        raise ToolError(
            f"cannot {verb} {shown}: it has {st.st_size} bytes, more than the "
            f"{MAX_EDIT_BYTES} these tools change"
        )
    data = read_head(path, MAX_EDIT_BYTES + 1, shown)
    if len(data) > MAX_EDIT_BYTES:  # it grew since the stat
        raise ToolError(f"cannot {verb} {shown}: it is larger than {MAX_EDIT_BYTES} bytes")
    return data


def _make_parents(path: Path, shown: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ToolError(f"cannot write {shown}: {exc.strerror or exc}") from None


def _write_local(path: Path, shown: str, data: bytes) -> None:
    """Replace the file atomically, keeping its permission bits (a script stays executable)."""
    _make_parents(path, shown)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    except OSError as exc:
        raise ToolError(f"cannot write {shown}: {exc.strerror}") from None
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise ToolError(f"cannot write {shown}: {exc.strerror or exc}") from None


def _umask() -> int:
    # Read, not set: os.umask() would change it for every thread of the process meanwhile.
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022
