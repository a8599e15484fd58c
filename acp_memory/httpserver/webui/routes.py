"""The API routes the web page needs beyond the rest: where the server stands, and a note's
markdown rendered as safe HTML."""

from __future__ import annotations

from typing import Literal

import anyio
from fastapi import APIRouter
from pydantic import Field

from acp_memory import __version__
from acp_memory.camel import CamelModel
from acp_memory.httpserver.agent import HttpAgent
from acp_memory.httpserver.models import Request
from acp_memory.httpserver.webui.markdown import render


class ServerInfo(CamelModel):
    object: Literal["server"] = "server"
    version: str
    cwd: str = Field(description="the folder new sessions start in unless told (--cwd)")
    default_model: str


class MarkdownBody(Request):
    text: str


class RenderedMarkdown(CamelModel):
    object: Literal["markdown"] = "markdown"
    html: str = Field(description="headings, lists, code, emphasis and http(s) links; the rest "
                      "escaped")


def web_routes(agent: HttpAgent) -> APIRouter:
    router = APIRouter(prefix="/coddy", tags=["web page"])

    @router.get("/server")
    async def server() -> ServerInfo:
        """This server: its version, the folder of new sessions and their default model."""
        return ServerInfo(
            version=__version__,
            cwd=str(agent.paths.cwd),
            default_model=agent.cfg.default_model_id(),
        )

    @router.post("/markdown")
    async def markdown(body: MarkdownBody) -> RenderedMarkdown:
        """Markdown as HTML that is safe to put in a page: nothing of the text's own markup
        (tags, attributes, scripts, other link schemes) survives."""
        html = await anyio.to_thread.run_sync(render, body.text)
        return RenderedMarkdown(html=html)

    return router
