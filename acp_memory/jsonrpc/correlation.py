"""Requests we send: each gets a fresh id and waits until the peer's answer with that id."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from acp_memory.jsonrpc.errors import INTERNAL_ERROR, RpcError

log = logging.getLogger(__name__)


class _Pending:
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: RpcError | None = None


class OutboundRequests:
    """Our requests awaiting their answers, by id; closed, every one fails."""

    def __init__(self, post: Callable[[Any], Awaitable[None]]) -> None:
        self._post = post
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._closed = False

    async def request(self, method: str, params: Any) -> Any:
        """Send a request and wait for its answer; raises RpcError on an error."""
        if self._closed:
            raise RpcError(INTERNAL_ERROR, "connection closed")
        msg_id = next(self._ids)
        pending = self._pending[msg_id] = _Pending()
        try:
            await self._post({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
            await pending.done.wait()
        finally:
            del self._pending[msg_id]
        if pending.error is not None:
            raise pending.error
        return pending.result

    def resolve(self, message: dict[str, Any]) -> None:
        """Hand a response to the request that waits for its id."""
        msg_id = message.get("id")
        pending = self._pending.get(msg_id) if isinstance(msg_id, int) else None
        if pending is None:
            log.warning("response to an unknown request id %r", msg_id)
            return
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            pending.error = RpcError(
                code if isinstance(code, int) else INTERNAL_ERROR,
                str(error.get("message", "")),
                error.get("data"),
            )
        else:
            pending.result = message.get("result")
        pending.done.set()

    def close(self) -> None:
        """No answer will come: the waiting requests and any later ones fail."""
        self._closed = True
        for pending in self._pending.values():
            if not pending.done.is_set():
                pending.error = RpcError(INTERNAL_ERROR, "connection closed")
                pending.done.set()
