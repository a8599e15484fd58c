"""The request body limit (httpserver.max_body_bytes), checked as the body streams in.

A body announced over the limit is refused before a byte of it is read; one that streams
past it (no Content-Length) fails its read with a 413, which the error handlers render like
every other error. Starlette's own limiter answers in plain text, hence this one.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from acp_memory.httpserver.errors import error_response

TOO_LARGE = "the request body is over the limit (httpserver.max_body_bytes)"


class BodyLimit:
    """ASGI middleware: request bodies of at most `max_bytes`."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = Headers(scope=scope).get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            await error_response(413, TOO_LARGE)(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    # An HTTPException, so that the route's body reading passes it on as is.
                    raise HTTPException(413, TOO_LARGE)
            return message

        await self.app(scope, limited, send)
