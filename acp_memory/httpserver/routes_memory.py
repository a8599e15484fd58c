"""/coddy/sessions/{id}/memory: the session's two note roots as a tree, with the tools' path
rules, size limit and secret redaction (the same MemoryStore does the work).

The roots are `global` and `workspace` here (the tools' `global:` and `project:`, which a
request may use too); a project root the config refuses (a link out of the workspace) is absent.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, TypeVar

import anyio
from fastapi import APIRouter, Query

from acp_memory.httpserver.agent import HttpAgent
from acp_memory.httpserver.errors import ApiError
from acp_memory.httpserver.models import (
    DirBody,
    MemoryDelete,
    MemoryDir,
    MemoryFile,
    MemoryTree,
    NoteBody,
    Root,
    RootIn,
    RootInfo,
    TreeEntry,
)
from acp_memory.httpserver.routes_sessions import SessionId
from acp_memory.memory.history.journal import JournalError
from acp_memory.memory.history.undo import ChangedSince, UnknownChange
from acp_memory.memory.redact import redact
from acp_memory.memory.roots import Location
from acp_memory.memory.shared.key import shared_key_of
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.timestamps import iso

SCOPES: dict[str, str] = {"global": "global", "workspace": "project"}
_PROJECT_PATH = re.compile(r"(?<![\w:.])project:")  # the store's name of a workspace path
T = TypeVar("T")

RootQuery = Annotated[RootIn, Query(description="global or workspace (project is workspace)")]
PathQuery = Annotated[str, Query(description="relative to the root; '' is the root itself")]


async def store_work(agent: HttpAgent, session_id: str, work: partial[T]) -> T:
    """Run blocking note work in a worker thread on the session's store (its changes made by
    `http`): an unknown change is 404, a path changed since 409, any other refusal 400."""
    session = await agent.read(session_id)
    store = agent.memory_store(session)
    try:
        return await anyio.to_thread.run_sync(work, store)
    except UnknownChange as exc:
        raise ApiError(404, api_words(str(exc))) from None
    except ChangedSince as exc:
        raise ApiError(409, api_words(str(exc))) from None
    except NoteError as exc:
        raise ApiError(400, api_words(str(exc))) from None
    except JournalError as exc:
        raise ApiError(503, str(exc)) from None


def memory_routes(agent: HttpAgent) -> APIRouter:
    router = APIRouter(prefix="/coddy/sessions/{id}/memory", tags=["memory"])
    in_store = partial(store_work, agent)

    @router.get("/tree", response_model_exclude_none=True)
    async def tree(
        session_id: SessionId, root: Annotated[RootIn | None, Query()] = None, path: PathQuery = ""
    ) -> MemoryTree:
        """Without `root`, the two roots; with it, one level of a folder (.md and .txt notes
        and subfolders)."""
        return await in_store(session_id, partial(_tree, root=root, path=path))

    @router.get("/file", response_model_exclude_none=True)
    async def read_file(session_id: SessionId, root: RootQuery, path: PathQuery) -> MemoryFile:
        """A note's UTF-8 text."""
        return await in_store(session_id, partial(_read, root=root, path=path))

    @router.put("/file", response_model_exclude_none=True)
    async def write_file(session_id: SessionId, body: NoteBody) -> MemoryFile:
        """Write a note whole (created or replaced), secrets redacted; 413 over
        memory.max_note_bytes."""
        return await in_store(session_id, partial(_write, body=body))

    @router.delete("/file")
    async def delete_file(session_id: SessionId, root: RootQuery, path: PathQuery) -> MemoryDelete:
        """Delete a note, or a folder with everything under it; never a root (400)."""
        return await in_store(session_id, partial(_delete, root=root, path=path))

    @router.post("/dir")
    async def make_dir(session_id: SessionId, body: DirBody) -> MemoryDir:
        """Create a folder (and its parents)."""
        return await in_store(session_id, partial(_mkdir, root=body.root, path=body.path))

    return router


# The blocking parts, run in a worker thread.


def _tree(store: MemoryStore, root: Root | None, path: str) -> MemoryTree:
    if root is None:
        roots = store.roots
        return MemoryTree(
            roots=[
                RootInfo(root=name, dir=str(roots.root_of(scope)),  # type: ignore[arg-type]
                         shared=shared_key_of(roots, scope))
                for name, scope in SCOPES.items()
                if scope in roots.scopes()
            ]
        )
    loc, entries = store.list_dir(_address(root, path))
    # A root not made yet is empty; any other missing folder is a wrong path.
    if not loc.is_root and not loc.path.is_dir():
        raise ApiError(404, f"no folder {root}:{loc.rel}")
    return MemoryTree(
        root=root,
        shared=shared_of(store, root),
        path=loc.rel,
        entries=[
            TreeEntry(
                name=e.loc.parts[-1],
                path=e.loc.rel,
                type="dir" if e.is_dir else "file",
                size=0 if e.is_dir else e.size,
                modified=iso(datetime.fromtimestamp(e.mtime, UTC)),
            )
            for e in entries
        ],
    )


def _read(store: MemoryStore, root: Root, path: str) -> MemoryFile:
    loc = _existing(store.note_location(_address(root, path)), root)
    _, content = store.read(loc.display)
    return MemoryFile(root=root, shared=shared_of(store, root), path=loc.rel, content=content)


def _write(store: MemoryStore, body: NoteBody) -> MemoryFile:
    try:
        result = store.write(_address(body.root, body.path), body.content)
    except NoteError as exc:
        # Over memory.max_note_bytes is 413, as written or once redacted (a secret's marker
        # can be longer than the secret).
        limit = store.max_note_bytes
        too_big = len(body.content.encode("utf-8")) > limit or (
            len(redact(body.content).text.encode("utf-8")) > limit
        )
        raise ApiError(413 if too_big else 400, api_words(str(exc))) from None
    loc = store.note_location(result.path)
    return MemoryFile(
        root=body.root,
        shared=shared_of(store, body.root),
        path=loc.rel,
        content=result.redaction.text,  # what was written
        status="updated" if result.updated else "saved",
        redacted=sorted(result.redaction.removed),
    )


def _delete(store: MemoryStore, root: Root, path: str) -> MemoryDelete:
    loc = store.locate(_address(root, path))
    if loc.is_root:
        raise ApiError(400, f"{root} is a root and is never deleted; delete what is inside")
    _existing(loc, root)
    result = store.delete(loc.display)
    return MemoryDelete(root=root, shared=shared_of(store, root), path=loc.rel,
                        deleted=result.notes_removed)


def _mkdir(store: MemoryStore, root: Root, path: str) -> MemoryDir:
    loc, created = store.mkdir(_address(root, path))
    return MemoryDir(root=root, shared=shared_of(store, root), path=loc.rel, created=created)


def shared_of(store: MemoryStore, root: Root) -> str | None:
    """The project key when `root` is the team's shared project memory."""
    return shared_key_of(store.roots, SCOPES[root])


def api_words(message: str) -> str:
    """A store message as this API says it: `project:notes/x.md` is `workspace:notes/x.md`."""
    return _PROJECT_PATH.sub("workspace:", message)


def _address(root: Root, path: str) -> str:
    """The store's `scope:rel` form of a root and a relative path."""
    return f"{SCOPES[root]}:{path}"


def _existing(loc: Location, root: Root) -> Location:
    if not loc.path.exists() and not loc.path.is_symlink():
        raise ApiError(404, f"nothing at {root}:{loc.rel}")
    return loc
