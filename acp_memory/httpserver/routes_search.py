"""/coddy/sessions/{id}/memory/search: the store's ranked note search over a session's two
roots, each hit's snippet cut into runs so that a client can highlight the matches, and when
and by whom its note last changed (as the memory tools say it)."""

from __future__ import annotations

from typing import Annotated, Literal

import anyio
from fastapi import APIRouter, Query
from pydantic import Field

from acp_memory.camel import CamelModel
from acp_memory.httpserver.agent import HttpAgent
from acp_memory.httpserver.errors import ApiError
from acp_memory.httpserver.models import NamesRoot, Root, RootIn
from acp_memory.httpserver.routes_memory import SCOPES, api_words
from acp_memory.httpserver.routes_sessions import SessionId
from acp_memory.memory.history.provenance import Provenance, provenance
from acp_memory.memory.search import Hit, Hits, marked
from acp_memory.memory.shared.key import shared_key_of
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.timestamps import iso

ROOTS = {scope: root for root, scope in SCOPES.items()}  # the store's scope -> the API's root


class SnippetRun(CamelModel):
    text: str
    match: bool = Field(description="a run that matches a term of the query")


class SearchHit(NamesRoot):
    root: Root
    path: str = Field(description="relative to the root")
    score: float
    snippet: str = Field(description="up to 1,200 characters around the best matches")
    runs: list[SnippetRun] = Field(description="the snippet, cut at each match")
    changed: str | None = Field(default=None, description="when the note last changed, ISO "
                                "8601 UTC (absent when it is gone since the search)")
    source: str | None = Field(default=None, description="who changed it last: memory_run, "
                               "reflect, memory_tool, cli, http, command, or `hand edit`")


class MemorySearch(CamelModel):
    object: Literal["memory_search"] = "memory_search"
    query: str
    hits: list[SearchHit] = Field(description="best first")
    # Present only when true: an index was still being built, so the files were scanned.
    partial: Literal[True] | None = Field(
        default=None, description="true while an index is built: the files were scanned"
    )
    embeddings_unavailable: str | None = Field(
        default=None, description="why the embeddings failed: the hits are by words only"
    )
    offline: str | None = Field(
        default=None, description="the shared project memory's server was out of reach: the "
        "hits are the local copy's (`shared memory offline: synced <time>`)"
    )


def search_routes(agent: HttpAgent) -> APIRouter:
    router = APIRouter(prefix="/coddy/sessions/{id}/memory", tags=["memory"])

    @router.get("/search", response_model_exclude_none=True)
    async def search(
        session_id: SessionId,
        q: Annotated[str, Query(min_length=1, max_length=1000, description="words, identifiers")],
        root: Annotated[RootIn | None, Query(description="one root; both without it")] = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
    ) -> MemorySearch:
        """Notes of the session's roots ranked by the words they share with `q` (paths count),
        exact identifiers first, as the memory subagent's memory_search ranks them."""
        session = await agent.read(session_id)
        store = agent.memory_store(session)
        scope = SCOPES[root] if root is not None else "both"
        try:
            hits, origins = await anyio.to_thread.run_sync(_search, store, q, scope, limit)
        except NoteError as exc:
            raise ApiError(400, api_words(str(exc))) from None
        return MemorySearch(
            query=q,
            hits=[_hit(hit, q, origin, store) for hit, origin in zip(hits, origins, strict=True)],
            partial=True if hits.partial else None,
            embeddings_unavailable=hits.unavailable or None,
            offline=hits.offline or None,
        )

    return router


def _search(
    store: MemoryStore, query: str, scope: str, limit: int
) -> tuple[Hits, list[Provenance | None]]:
    """The hits and, for each, its note's provenance (None for a note gone since)."""
    hits = store.search(query, scope, limit)
    return hits, [_origin(store, hit.path) for hit in hits]


def _origin(store: MemoryStore, path: str) -> Provenance | None:
    try:
        loc, data, mtime = store.read_bytes(path)
    except NoteError:
        return None
    return provenance(store.journal, loc.root, loc.rel, data, mtime)


def _hit(hit: Hit, query: str, origin: Provenance | None, store: MemoryStore) -> SearchHit:
    scope, _, rel = hit.path.partition(":")
    return SearchHit(
        root=ROOTS[scope],  # type: ignore[arg-type]
        shared=shared_key_of(store.roots, scope),
        path=rel,
        score=hit.score,
        snippet=hit.snippet,
        runs=[SnippetRun(text=text, match=match) for text, match in marked(hit.snippet, query)],
        changed=iso(origin.changed) if origin else None,
        source=origin.source if origin else None,
    )
