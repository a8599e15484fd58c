"""Who may talk to the server: a bearer token when one is set, else same-machine callers only.

With a token every request must carry it. Without one (a loopback bind only), a request whose
Host is not this server, or whose Origin is another site, is refused: a web page elsewhere
could otherwise drive the agent through the user's browser (CSRF), or through a name of its
own that resolves to 127.0.0.1 (DNS rebinding).
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from acp_memory.httpserver.errors import error_response

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """Whether a bind address only this machine can reach."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def bind_problem(host: str, token: str) -> str | None:
    """Why the server must not start on `host` with `token`, or None."""
    if not token and not is_loopback(host):
        return (
            f"refusing to listen on {host} without a token: anyone who can reach it could drive "
            "the agent; set httpserver.auth_token or pass --auth-token (or bind 127.0.0.1)"
        )
    return None


class Guard:
    """ASGI middleware in front of every route, the OpenAPI document included."""

    def __init__(self, app: ASGIApp, *, token: str, host: str) -> None:
        self.app = app
        self.token = token.encode()
        self.names = LOOPBACK_NAMES | {host.strip("[]").lower()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.refusal(scope)
            if refusal is not None:
                status, message = refusal
                headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
                await error_response(status, message, headers)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        headers = Headers(scope=scope)
        if self.token:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode(), self.token
            ):
                return 401, "a valid bearer token is required (Authorization: Bearer <token>)"
            return None
        port = (scope.get("server") or ("", 0))[1]
        host = headers.get("host", "")
        if not self._ours(f"http://{host}", port):
            return 403, f"Host {host!r} is not this server; use http://127.0.0.1:{port}"
        origin = headers.get("origin")
        if origin is not None and not self._ours(origin, port):
            return 403, f"requests from the web page at {origin!r} are refused"
        return None

    def _ours(self, url: str, port: int) -> bool:
        """Whether url names this server: a loopback name (or the bound one) and our port."""
        try:
            parts = urlsplit(url)
            their_port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return False
        return (
            parts.scheme == "http" and parts.hostname in self.names and their_port == port
        )
