"""The editor as the proxy's memory reaches it: session updates, memory_run notifications and
review questions through the relay, under the inner session's id; and the replayed user
messages it gets without their memory blocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp_memory.acp.updates import memory_run_message
from acp_memory.config import Config
from acp_memory.config.models import MemoryRunUpdates
from acp_memory.jsonrpc.errors import INTERNAL_ERROR, RpcError
from acp_memory.proxy.relay import Relay, Side
from acp_memory.proxy.sessions import without_block


class EditorLink:
    """The policy's way to the editor; a `Requester` for the memory runs' review questions."""

    def __init__(self, cfg: Config, inner_id: Callable[[str], str]) -> None:
        self.relay: Relay | None = None  # until the policy is attached
        self.inner_id = inner_id  # the inner id of a proxy bundle's id
        # How memory_run updates go out: the client's choice at initialize, else the
        # config's when its file sets it; the editors a proxy serves log the default form.
        configured = cfg.acp.memory_run_updates
        self.run_form: MemoryRunUpdates = (
            configured if "memory_run_updates" in cfg.acp.model_fields_set else "off"
        )

    async def request(self, method: str, params: Any) -> Any:
        """A request to the editor, its session id the inner one; its error raised."""
        relay = self.relay
        if relay is None:
            raise RpcError(INTERNAL_ERROR, "the proxy is not relaying")
        if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
            params = {**params, "sessionId": self.inner_id(params["sessionId"])}
        reply = await relay.request(Side.EDITOR, method, params)
        if reply.error is not None:
            error = reply.error
            raise RpcError(int(error.get("code", INTERNAL_ERROR)), str(error.get("message", "")),
                           error.get("data"))
        return reply.result

    def notifier(self, inner_id: str) -> Callable[[dict[str, Any]], Any]:
        """A memory run's notify: its memory_run updates in the form chosen."""
        async def notify(update: dict[str, Any]) -> None:
            message = memory_run_message(self.run_form, inner_id, update)
            if message is not None and self.relay is not None:
                await self.relay.notify(Side.EDITOR, *message)

        return notify

    async def update(self, inner_id: str, update: dict[str, Any]) -> None:
        """A `session/update` of the inner session."""
        if self.relay is not None:
            await self.relay.notify(Side.EDITOR, "session/update",
                                    {"sessionId": inner_id, "update": update})


def replayed_user(params: dict[str, Any], update: dict[str, Any]) -> Any | None:
    """A replayed user message's notification without the memory block; None when the block
    came as a block of its own."""
    content = update.get("content")
    if not isinstance(content, dict) or not isinstance(content.get("text"), str):
        return params
    text = without_block(content["text"])
    if text == content["text"]:
        return params
    if not text:  # the block as a block of its own
        return None
    return {**params, "update": {**update, "content": {**content, "text": text}}}
