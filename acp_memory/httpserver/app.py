"""The FastAPI application: every route, its errors as JSON, and the guard in front of them."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from acp_memory import __version__
from acp_memory.httpserver.agent import HttpAgent
from acp_memory.httpserver.errors import install_error_handlers
from acp_memory.httpserver.limits import BodyLimit
from acp_memory.httpserver.models import ErrorBody
from acp_memory.httpserver.routes_history import history_routes
from acp_memory.httpserver.routes_memory import memory_routes
from acp_memory.httpserver.routes_openai import openai_routes
from acp_memory.httpserver.routes_search import search_routes
from acp_memory.httpserver.routes_sessions import session_routes
from acp_memory.httpserver.routes_settings import settings_routes
from acp_memory.httpserver.routes_tasks import task_routes
from acp_memory.httpserver.security import Guard
from acp_memory.httpserver.webui.page import WebPage
from acp_memory.httpserver.webui.routes import web_routes

DESCRIPTION = (
    "The acp-memory agent over HTTP: sessions and their turns, each session's updates as "
    "server-sent events, the long-term notes of a session's two roots, its background tasks "
    "(memory runs included), and an OpenAI-compatible chat completions endpoint. Errors are "
    '`{"error": {"message", "type"}}`.'
)
ROUTERS = (
    session_routes, memory_routes, history_routes, search_routes, task_routes, settings_routes,
    web_routes, openai_routes,
)
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": why}
    for status, why in [
        (400, "malformed request, bad path or value"),
        (401, "missing or wrong bearer token"),
        (403, "Host or Origin of another site"),
        (404, "unknown session, task, note, change or route"),
        (409, "the session is busy, or the note changed since the change to undo or approve"),
        (413, "body or note over its limit"),
        (503, "the memory history cannot be read or written"),
    ]
}


def create_app(agent: HttpAgent, *, host: str, token: str, max_body_bytes: int) -> FastAPI:
    """The application over `agent`, guarded for a server bound to `host`."""
    app = FastAPI(
        title="acp-memory",
        version=__version__,
        description=DESCRIPTION,
        # Their pages load scripts from a CDN, and this server works offline: the OpenAPI
        # document itself stays at /openapi.json.
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router(agent), responses=ERRORS)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    # Added last, so it runs first: no body is read before the guard lets a request in.
    app.add_middleware(Guard, token=token, host=host)
    # The web page's shell and assets hold no data: answered before the guard, so that a
    # browser opens the page of a server with a token too (the page's requests carry it).
    app.add_middleware(WebPage)

    def openapi() -> dict[str, Any]:
        # A malformed request is a 400 in our error shape, never FastAPI's 422.
        if app.openapi_schema is None:
            doc = get_openapi(
                title=app.title, version=app.version, description=app.description,
                routes=app.routes,
            )
            for operations in doc["paths"].values():
                for operation in operations.values():
                    operation["responses"].pop("422", None)
            schemas = doc.get("components", {}).get("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
