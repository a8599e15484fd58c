"""The page's shell and its assets, answered before the API's guard sees the request.

They hold no data (they are the files shipped in the wheel), so a browser may load them from a
server that wants a bearer token: everything the page then asks for goes through the API with
the token, and meets the guard like any other client's request. The page carries a strict
Content Security Policy: its own script and styles only, no inline script, no other origin.
"""

from __future__ import annotations

from importlib.resources import files
from string import Template

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from acp_memory import __version__

ASSETS = {
    "history.js": "text/javascript; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def page_files() -> dict[str, tuple[bytes, str]]:
    """URL path -> (body, content type) of the shell and each asset."""
    package = files("acp_memory.httpserver.webui")
    shell = Template(package.joinpath("templates", "index.html").read_text(encoding="utf-8"))
    served = {
        "/": (shell.substitute(version=__version__).encode(), "text/html; charset=utf-8"),
    }
    for name, media in ASSETS.items():
        served[f"/static/{name}"] = (package.joinpath("static", name).read_bytes(), media)
    return served


class WebPage:
    """ASGI middleware: GET of the page or an asset answered here, all else passed on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.files = page_files()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self.files.get(scope["path"]) if scope["type"] == "http" else None
        if found is None or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        body, media = found
        await Response(body, media_type=media, headers=HEADERS)(scope, receive, send)
