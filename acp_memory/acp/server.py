"""Assembles the agent: config, engine and ACP handlers over one JSON-RPC connection."""

from __future__ import annotations

import logging

from anyio.abc import ByteReceiveStream, ByteSendStream

from acp_memory.acp.agent import AcpAgent
from acp_memory.config import Config, Paths
from acp_memory.engine.prompt import Templates
from acp_memory.engine.turn import ModelSettings, TurnEngine
from acp_memory.jsonrpc.connection import Connection
from acp_memory.jsonrpc.errors import INVALID_PARAMS, RpcError
from acp_memory.llm.offline import OfflineProvider
from acp_memory.llm.provider import Provider
from acp_memory.tools.files import ListDirectory, ReadFile
from acp_memory.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


def build_agent(cfg: Config, paths: Paths) -> AcpAgent:
    """The agent with its engine, tools and model resolution, not yet connected."""
    engine = TurnEngine(
        Templates(cfg.prompts.dir), ToolRegistry([ReadFile(), ListDirectory()]), cfg.agent.max_turns
    )

    def provider_for(model_id: str) -> tuple[Provider, ModelSettings]:
        model = cfg.find_model(model_id)
        provider = cfg.find_provider(model.provider_name)
        if provider is None or provider.type != "offline":
            raise RpcError(INVALID_PARAMS, f"model {model_id!r} names no configured provider")
        settings = ModelSettings(model.upstream_id, model.max_tokens, model.temperature, model.stream)
        return OfflineProvider(), settings

    return AcpAgent(cfg, paths, engine, provider_for)


async def serve(receive: ByteReceiveStream, send: ByteSendStream, cfg: Config, paths: Paths) -> None:
    """Serve ACP on a pair of byte streams until the input ends."""
    agent = build_agent(cfg, paths)
    conn = Connection(receive, send, agent.handlers(), on_input_closed=agent.cancel_all)
    agent.peer = conn
    await conn.serve()
    log.info("input closed; agent stopped")
