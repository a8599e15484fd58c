"""Kodik's direct `memory` tool: the main agent saves or deletes one named note itself.

Offered with memory.inline only, to top-level sessions in agent mode. A note is a bare file
name in the `workspace` scope (the project root, `<cwd>/memory`) or the `global` one. Writes go
through the MemoryStore the six memory tools use: the root's lock, atomic writes, the size
limit and secret redaction. Like the memory subagent's saves, a call writes without asking the
user (it changes the notes, never the workspace's files, and says in its result what it did),
unless memory.review is ask: then it asks first, on its own tool call, or holds the change for
approval when nobody can be asked (`review.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from acp_memory.config import Config, Paths
from acp_memory.memory.history.records import ChangeSource, change_message
from acp_memory.memory.review import (
    Proposal,
    Review,
    TurnQuestions,
    propose_delete,
    propose_write,
    reviewer_for,
)
from acp_memory.memory.roots import NOTE_SUFFIXES, Roots, scope_name
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.memory.tools import format_save, run_note_work, run_reviewed
from acp_memory.tools.base import ToolContext, ToolKind, ToolResult
from acp_memory.tools.permissions import GRANTS_FILE, PermissionGate

TOOL_NAME = "memory"
# The tool's scope names; input also takes the store's `project` (roots.scope_name maps them).
TOOL_SCOPES = ("workspace", "global", "project")
TOOL_SCOPE = {"project": "workspace", "global": "global"}  # how results name a store scope
_DRIVE = re.compile(r"^[A-Za-z]:")


def note_name(path: str) -> str:
    """The file a `path` argument names: a bare file name, `.md` added unless it ends in .md
    or .txt. NoteError for an empty name, a folder, an absolute path or `..`."""
    name = path.strip()
    if not name:
        raise NoteError("path is empty; give a bare file name such as testing-conventions.md")
    if name.startswith(("/", "~")) or _DRIVE.match(name):
        raise NoteError(f"{path!r} is an absolute path; give a bare file name, no folders")
    if ".." in name:
        raise NoteError(f"{path!r} contains '..'; give a bare file name, no folders")
    if "/" in name or "\\" in name:
        raise NoteError(f"{path!r} names a folder; give a bare file name, no folders")
    return name if name.lower().endswith(NOTE_SUFFIXES) else f"{name}.md"


def wants_delete(value: Any) -> bool:
    """The `delete` argument: "true" or true deletes; absent, "false" or false does not (the
    schema refuses any other value before the call runs)."""
    return value is True or value == "true"


class DirectMemoryTool:
    """`memory`: save (`content`) or delete (`delete: "true"`) one note of a scope."""

    name = TOOL_NAME
    kind: ToolKind = "edit"
    read_only = False

    def __init__(self, cfg: Config, paths: Paths) -> None:
        self.cfg = cfg
        self.paths = paths
        limit = cfg.memory.max_note_bytes
        self.description = (
            "Save or delete a long-term memory note: a markdown file with a bare name in the "
            "workspace scope (this project) or the global scope (every project).\n"
            "Give content to create or replace the note, or delete: \"true\" instead of "
            "content to remove it. The path is a file name only (no folders, no absolute "
            "paths, no '..'); .md is added unless it ends in .md or .txt. Notes load into the "
            "system prompt when a session starts, so what you save is seen from the next "
            f"session on. Content is at most {limit} bytes of UTF-8; secrets are replaced by "
            "[REDACTED:<kind>] before writing."
        )
        self.parameters: Mapping[str, Any] = {
            "type": "object",
            "properties": {
                "scope": {
                    "type": "string",
                    "enum": list(TOOL_SCOPES),
                    "description": "workspace (this project) or global (every project)",
                },
                "path": {"type": "string", "description": "file name, e.g. conventions.md"},
                "content": {"type": "string", "description": "the whole note, markdown"},
                "delete": {
                    "enum": ["true", "false", True, False],
                    "description": '"true" to delete the note (instead of content)',
                },
            },
            "required": ["scope", "path"],
            "additionalProperties": False,
        }

    def title(self, args: Mapping[str, Any]) -> str:
        verb = "delete" if wants_delete(args.get("delete")) else "save"
        path = str(args.get("path", ""))
        try:
            path = note_name(path)
        except NoteError:
            pass  # the title shows what was asked; the call itself reports the error
        return f"Memory {verb} {args.get('scope', '')}:{path}"

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
        roots = Roots.from_config(self.cfg, self.paths, ctx.cwd)
        root = roots.root_of(scope_name(str(args["scope"])))
        return [str(root / note_name(str(args["path"])))]

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        if self.cfg.memory.review == "ask":
            return await self._reviewed(args, ctx)
        return await run_note_work(self.name, lambda: self._apply(args, ctx), False)

    async def _reviewed(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """memory.review: ask: the change asked about on this call's own tool call id (the
        engine's update of the call says how it ended), or held."""
        grants = (PermissionGate(self.cfg.tools, ctx.bundle / GRANTS_FILE, None)
                  if ctx.bundle is not None else None)
        questions = TurnQuestions(ctx.session_id, reviewer_for(ctx.editor), grants)
        try:
            target, shown, content = self._target(args)
        except NoteError as exc:
            return ToolResult(f"Error: {exc}", is_error=True)
        with self._store(ctx) as store:

            def propose() -> Proposal:
                if content is None:
                    return propose_delete(store, target)
                return propose_write(store, target, content)

            def commit(seen: Proposal) -> str:
                if content is None:
                    store.delete(target, folders=False, if_state=seen.before.state)
                    return f"deleted note {shown}."
                written = store.write(target, content, if_unchanged=seen.current or "")
                return format_save(written, shown)

            review = Review(store, questions, lambda: ctx.call_id)
            result = await run_reviewed(self.name, review, propose, commit)
        # The store names the root by its own scope; the model knows it as `scope`.
        return ToolResult(result.text.replace(target, shown), is_error=result.is_error)

    def _store(self, ctx: ToolContext) -> MemoryStore:
        source = ChangeSource("memory_tool", ctx.session_id, None, change_message(ctx.message))
        return MemoryStore.from_config(self.cfg, self.paths, ctx.cwd, source=source)

    def _target(self, args: Mapping[str, Any]) -> tuple[str, str, str | None]:
        """The note a call names as the store and as the model know it, and the content to
        save (None: a delete)."""
        scope = str(args["scope"])
        name = note_name(str(args["path"]))
        content = args.get("content")
        delete = wants_delete(args.get("delete"))
        if delete and content is not None:
            raise NoteError('give either content (to save) or delete: "true", not both')
        if not delete and content is None:
            raise NoteError('give content to save the note, or delete: "true" to delete it')
        store_scope = scope_name(scope)
        target = f"{store_scope}:{name}"
        return target, f"{TOOL_SCOPE[store_scope]}:{name}", None if delete else str(content)

    def _apply(self, args: Mapping[str, Any], ctx: ToolContext) -> str:
        """The call's save or delete, on a worker thread."""
        target, shown, content = self._target(args)
        with self._store(ctx) as store:
            try:
                if content is None:
                    store.delete(target, folders=False)
                    return f"deleted note {shown}."
                return format_save(store.write(target, str(content)), shown)
            except NoteError as exc:
                # The store names the root by its own scope; the model knows it as `scope`.
                raise NoteError(str(exc).replace(target, shown)) from None
