"""The handshake every agent answers (initialize, authenticate), and the agent that answers
only it when its config failed to load."""

from __future__ import annotations

from typing import Any, get_args

from acp_memory import __version__
from acp_memory.acp.schema import (
    PROTOCOL_VERSION,
    AuthenticateRequest,
    InitializeRequest,
    initialize_response,
)
from acp_memory.acp.wire import parse_params
from acp_memory.config.models import MemoryRunUpdates
from acp_memory.jsonrpc.dispatch import Handler
from acp_memory.jsonrpc.errors import INTERNAL_ERROR, INVALID_PARAMS, RpcError

Handlers = dict[str, Handler]

# Every request and notification beyond the handshake, each on a session.
SESSION_METHODS = tuple(
    f"session/{name}"
    for name in "new load resume list prompt cancel set_mode set_config_option close delete".split()
)


async def initialize(params: dict[str, Any]) -> dict[str, Any]:
    """The answer to `initialize`: the version we both speak, and what this agent can do."""
    req = parse_params(InitializeRequest, params)
    version = min(req.protocol_version, PROTOCOL_VERSION)
    return initialize_response(version, "acp-memory", __version__)


def memory_run_updates(
    client_capabilities: dict[str, Any], configured: MemoryRunUpdates
) -> MemoryRunUpdates:
    """How this connection gets memory_run updates: as the client asked at initialize with
    `clientCapabilities._meta.memoryRunUpdates`, else as `acp.memory_run_updates` says."""
    meta = client_capabilities.get("_meta")
    asked = meta.get("memoryRunUpdates") if isinstance(meta, dict) else None
    if asked is None:
        return configured
    if asked is False:  # as an unquoted `off` in config.yaml reads
        return "off"
    forms: tuple[MemoryRunUpdates, ...] = get_args(MemoryRunUpdates)
    for form in forms:
        if asked == form:
            return form
    raise RpcError(
        INVALID_PARAMS,
        f"Invalid params: clientCapabilities._meta.memoryRunUpdates: {asked!r} is not one of "
        + ", ".join(forms),
    )


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

    return {
        "initialize": initialize,
        "authenticate": authenticate,
        **{method: refuse for method in SESSION_METHODS},
        "session/cancel": ignore,
    }
