"""The handshake every agent answers (initialize, authenticate), and the agent that answers
only it when its config failed to load."""

from __future__ import annotations

from typing import Any

from acp_memory import __version__
from acp_memory.acp.schema import (
    PROTOCOL_VERSION,
    AuthenticateRequest,
    InitializeRequest,
    initialize_response,
)
from acp_memory.acp.wire import parse_params
from acp_memory.jsonrpc.dispatch import Handler
from acp_memory.jsonrpc.errors import INTERNAL_ERROR, RpcError

Handlers = dict[str, Handler]


async def initialize(params: dict[str, Any]) -> dict[str, Any]:
    """The answer to `initialize`: the version we both speak, and what this agent can do."""
    req = parse_params(InitializeRequest, params)
    version = min(req.protocol_version, PROTOCOL_VERSION)
    return initialize_response(version, "acp-memory", __version__)


async def authenticate(params: dict[str, Any]) -> dict[str, Any]:
    """No authentication is needed: provider keys come from the config."""
    parse_params(AuthenticateRequest, params)
    return {}


def unconfigured_handlers(problem: str) -> Handlers:
    """An agent whose config failed to load: it answers initialize, so the editor connects
    and shows `problem` on the first session request, rather than a bare "server exited"."""

    async def refuse(params: dict[str, Any]) -> dict[str, Any]:
        raise RpcError(INTERNAL_ERROR, problem)  # the line stderr says, word for word

    async def ignore(params: dict[str, Any]) -> None:
        return None

    session_methods = ("new", "load", "list", "prompt", "set_mode", "set_config_option")
    return {
        "initialize": initialize,
        "authenticate": authenticate,
        "session/cancel": ignore,
        **{f"session/{name}": refuse for name in session_methods},
    }
