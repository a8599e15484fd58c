"""The six memory tools (search, list, read, mkdir, save, delete) over a MemoryStore."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio

from acp_memory.config.models import MemoryConfig
from acp_memory.memory.facts import hits_facts, read_result
from acp_memory.memory.review import Proposal, Review, propose_delete, propose_write
from acp_memory.memory.roots import SCOPE_ALIASES, FolderEntry, MemoryPathError, scope_name
from acp_memory.memory.search import Hits
from acp_memory.memory.store import MemoryStore, NoteError, SaveResult
from acp_memory.tools.base import Tool, ToolContext, ToolKind, ToolResult

_PATH = {"type": "string", "description": "scope:relative/path, e.g. global:notes/todo.md"}
# The project root, as the tools name it and as HTTP and the inline tool do: input takes both.
_PROJECT = ["project", *SCOPE_ALIASES]


def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def _arg(args: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise NoteError(f"argument {name!r} must be a string" + (" (required)" if required else ""))
    return value


def _when(mtime: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(mtime))


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


EMPTY_FOLDER = "is empty (no notes or folders)."
NO_MATCH = "no matching notes for "


def came_back_empty(result: str) -> bool:
    """Whether a memory_search or memory_list result found no note (its words are here)."""
    while result.startswith("("):  # the notices a search result may open with
        result = result.partition("\n")[2]
    return result.startswith(NO_MATCH) or result.endswith(EMPTY_FOLDER)


def search_notices(hits: Hits) -> list[str]:
    """The lines a search result opens with: how it was answered when not as usual."""
    notices = ["(index still building: direct scan)"] if hits.partial else []
    if hits.unavailable:
        notices.append(f"(embeddings unavailable: {hits.unavailable}; words only)")
    if hits.offline:
        notices.append(f"({hits.offline})")
    return notices


def format_listing(display: str, entries: list[FolderEntry]) -> str:
    """One line per folder or note, with size and modification time."""
    head = display if display.endswith((":", "/")) else display + "/"
    if not entries:
        return f"{head} {EMPTY_FOLDER}"
    lines = [f"{head} ({_count(len(entries), 'entry', 'entries')})"]
    for e in entries:
        if e.is_dir:
            lines.append(f"  folder  {e.loc.display}/  modified {_when(e.mtime)}")
        else:
            lines.append(f"  note    {e.loc.display}  {e.size} bytes  modified {_when(e.mtime)}")
    return "\n".join(lines)


def format_hits(
    query: str, hits: Hits, where: str, facts: Callable[[str], list[str]] | None = None
) -> str:
    """Hits with path, score and snippet, or one clear line when nothing matched; a list the
    limit cut says how many matched in all; notices first. `facts(path)` gives the lines that
    follow a hit's path line (memory/facts.py)."""
    notices = search_notices(hits)
    if not hits:
        return "\n".join([*notices, f"{NO_MATCH}{query!r} in {where}."])
    found = _count(hits.total, "matching note", "matching notes")
    if hits.total > len(hits):
        found = f"showing {len(hits)} of {found}"
    parts = [*notices, f"{found} for {query!r} in {where} (best first):"]
    for i, hit in enumerate(hits, 1):
        lines = facts(hit.path) if facts is not None else []
        parts.append("\n".join([f"\n[{i}] {hit.path} (score {hit.score})", *lines,
                                hit.snippet]))
    return "\n".join(parts)


def format_save(result: SaveResult, shown: str | None = None) -> str:
    """Says "updated" when a note was replaced, so an update is never taken for a new note;
    `shown` names the note as the caller addressed it (default: its scope:path)."""
    path = shown or result.path
    if result.updated:
        line = (f"updated {path}: replaced the existing note "
                f"({result.previous_size} bytes) with {result.size} bytes.")
    else:
        line = f"saved new note {path} ({result.size} bytes)."
    summary = result.redaction.summary()
    return f"{line}\n{summary}" if summary else line


@dataclass
class MemoryTool:
    """One memory tool: schema and metadata, and a handler run on a worker thread."""

    name: str
    description: str
    kind: ToolKind
    parameters: Mapping[str, Any]
    read_only: bool
    handler: Callable[..., str]  # (args), or (args, the proposal the user was shown)
    title_arg: str
    # memory.review: ask: the change the call would make, shown before it is made.
    propose: Callable[[Mapping[str, Any]], Proposal] | None = None
    review: Review | None = None

    def title(self, args: Mapping[str, Any]) -> str:
        verb = self.name.removeprefix("memory_").capitalize()
        return f"Memory {verb} {args.get(self.title_arg, '')}".rstrip()

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        if self.review is not None and self.propose is not None:
            return await run_reviewed(self.name, self.review, partial(self.propose, args),
                                      partial(self.handler, args))
        return await run_note_work(self.name, partial(self.handler, args), self.read_only)


async def run_note_work(name: str, work: Callable[[], str], read_only: bool) -> ToolResult:
    """A memory tool's work on a worker thread; a refused or failed operation becomes a tool
    error the model reads."""
    try:
        # Search may (re)build the index and every write waits on a file lock: keep the
        # event loop free.
        # A cancelled read is abandoned at once; a write runs to its end, so a note is
        # either saved whole or not at all, never left to a thread nobody waits for.
        text = await anyio.to_thread.run_sync(work, abandon_on_cancel=read_only)
    except (NoteError, MemoryPathError, OSError, ValueError, RuntimeError) as exc:
        return _failed(name, exc)
    return ToolResult(text)


async def run_reviewed(
    name: str, review: Review, propose: Callable[[], Proposal], commit: Callable[[Proposal], str]
) -> ToolResult:
    """A write under memory.review: ask: its change proposed (a worker thread), asked about
    outside the root's lock, then committed against what was shown, or held."""
    try:
        proposal = await anyio.to_thread.run_sync(propose, abandon_on_cancel=True)
    except (NoteError, MemoryPathError, OSError, ValueError, RuntimeError) as exc:
        return _failed(name, exc)
    return await review.change(
        proposal, lambda shown: run_note_work(name, partial(commit, shown), False)
    )


def _failed(name: str, exc: Exception) -> ToolResult:
    if isinstance(exc, NoteError | MemoryPathError):
        return ToolResult(f"Error: {exc}", is_error=True)
    if isinstance(exc, OSError):
        return ToolResult(f"Error: {name} failed: {exc.strerror or exc}", is_error=True)
    # ValueError, RuntimeError: e.g. text no file system can hold
    return ToolResult(f"Error: {name} failed: {exc}", is_error=True)


def memory_tools(
    store: MemoryStore, cfg: MemoryConfig, review: Review | None = None
) -> list[Tool]:
    """The six tools over one store; search, list and read are read-only (ask mode's set).
    With review (memory.review: ask), save and delete ask the user first."""
    both = "global, project or both"

    def search(args: Mapping[str, Any]) -> str:
        query = _arg(args, "query") or ""
        scope = scope_name(_arg(args, "scope", required=False) or "both")
        hits = store.search(query, scope, cfg.max_search_hits)
        where = " and ".join(store.roots.scopes()) if scope == "both" else scope
        facts = hits_facts(store, [hit.path for hit in hits])
        return format_hits(query, hits, where, lambda path: facts.get(path, []))

    def list_(args: Mapping[str, Any]) -> str:
        path = _arg(args, "path", required=False)
        if not path:
            return "\n\n".join(
                format_listing(f"{s}:", store.list_dir(f"{s}:")[1]) for s in store.roots.scopes()
            )
        loc, entries = store.list_dir(path)
        return format_listing(loc.display, entries)

    def read(args: Mapping[str, Any]) -> str:
        return read_result(store, _arg(args, "path") or "")

    def mkdir(args: Mapping[str, Any]) -> str:
        loc, created = store.mkdir(_arg(args, "path") or "")
        return f"created folder {loc.display}/" if created else f"folder {loc.display} exists"

    def save(args: Mapping[str, Any], shown: Proposal | None = None) -> str:
        if shown is not None:  # written only if the note is still the text the user saw
            path, title_red = _save_target(args)
            return format_save(store.write(path, _arg(args, "body") or "", extra=title_red,
                                           if_unchanged=shown.current or ""))
        result = store.save(
            _arg(args, "title") or "",
            _arg(args, "body") or "",
            _arg(args, "scope") or "",
            _arg(args, "relative_path", required=False),
        )
        return format_save(result)

    def _save_target(args: Mapping[str, Any]) -> tuple[str, Any]:
        return store.save_target(_arg(args, "title") or "", _arg(args, "scope") or "",
                                 _arg(args, "relative_path", required=False))

    def propose_save(args: Mapping[str, Any]) -> Proposal:
        path, title_red = _save_target(args)
        return propose_write(store, path, _arg(args, "body") or "", title_red)

    def propose_delete_(args: Mapping[str, Any]) -> Proposal:
        return propose_delete(store, _arg(args, "path") or "")

    def delete(args: Mapping[str, Any], shown: Proposal | None = None) -> str:
        result = store.delete(_arg(args, "path") or "",
                              if_state=None if shown is None else shown.before.state)
        if result.was_folder:
            removed = _count(result.notes_removed, "note", "notes")
            return f"deleted folder {result.path} and the {removed} under it."
        return f"deleted note {result.path}."

    return [
        MemoryTool(
            "memory_search",
            "Search the long-term notes by relevance of path and body. Works in any language, "
            "matches inflected word forms and identifiers (whole or by parts). Notes with an exact "
            "identifier of the query come first, else notes holding every query word, else notes "
            "holding any. Few words or one identifier work best. Returns at most "
            f"{cfg.max_search_hits} hits with path, score, when the note last changed and by "
            "whom, the paths it cites that are gone from the workspace, and a snippet; open a hit "
            "with memory_read.",
            "search",
            _schema(
                {
                    "query": {"type": "string", "description": "words or identifiers to find"},
                    "scope": {"type": "string", "enum": ["global", *_PROJECT, "both"],
                              "description": f"{both} (default both)"},
                },
                ["query"],
            ),
            True, search, "query",
        ),
        MemoryTool(
            "memory_list",
            "List one folder of notes (one level): subfolders and notes with size and "
            "modification time. Omit path to list both roots; a missing folder is empty.",
            "read",
            _schema({"path": {**_PATH, "description": "folder, e.g. global: or project:notes"}},
                    []),
            True, list_, "path",
        ),
        MemoryTool(
            "memory_read",
            "Read the whole text of one note (a .md or .txt file), e.g. global:preferences.md. "
            "Before the text: when it last changed and by whom (\"(old)\" past 90 days) and "
            "a line for each path it cites that is not in the workspace.",
            "read",
            _schema({"path": _PATH}, ["path"]),
            True, read, "path",
        ),
        MemoryTool(
            "memory_mkdir",
            "Create a folder of notes (parents included), e.g. project:architecture.",
            "edit",
            _schema({"path": {**_PATH, "description": "folder, e.g. project:architecture"}},
                    ["path"]),
            # Not reviewed (memory.review): an empty folder holds nothing to consent to.
            False, mkdir, "path",
        ),
        MemoryTool(
            "memory_save",
            "Save a note. Without relative_path the file name comes from the title; with a "
            "folder it lands there; with a path ending .md it is written at that path. Saving "
            "onto an existing note replaces it (the result says \"updated\"). The body is at most "
            f"{store.max_note_bytes} bytes of UTF-8; secrets are replaced by [REDACTED:<kind>].",
            "edit",
            _schema(
                {
                    "title": {"type": "string", "description": "short descriptive title"},
                    "body": {"type": "string", "description": "the whole note, markdown"},
                    "scope": {"type": "string", "enum": ["global", *_PROJECT]},
                    "relative_path": {"type": "string",
                                      "description": "optional folder or notes/file.md"},
                },
                ["title", "body", "scope"],
            ),
            False, save, "title", propose_save, review,
        ),
        MemoryTool(
            "memory_delete",
            "Delete a note, or a folder with everything under it. A root is never deleted.",
            "delete",
            _schema({"path": _PATH}, ["path"]),
            False, delete, "path", propose_delete_, review,
        ),
    ]
