"""One inbound request to its answer: the handler through jsonrpcserver, and the work it asked
to run once that answer is queued (after_reply)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any

from jsonrpcserver import Error, Success
from jsonrpcserver.async_main import dispatch_to_serializable
from jsonrpcserver.result import Result

from acp_memory.jsonrpc.errors import INTERNAL_ERROR, RpcError
from acp_memory.jsonrpc.messages import error_response

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
AfterReply = list[Callable[[], Awaitable[None]]]

# Work the request being handled asked to run once its answer is queued (after_reply).
_AFTER_REPLY: ContextVar[AfterReply | None] = ContextVar("_AFTER_REPLY", default=None)


def after_reply(work: Callable[[], Awaitable[None]]) -> None:
    """Run `work` once the answer to the request being handled is queued: a notification
    the peer can only place once it has that answer (a handler's own messages go out before
    it). Outside a request handler, RuntimeError."""
    pending = _AFTER_REPLY.get()
    if pending is None:
        raise RuntimeError("after_reply() outside a request handler")
    pending.append(work)


class Methods:
    """The handlers by method name, called the way jsonrpcserver binds them."""

    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        self._methods = {name: _adapt(h) for name, h in handlers.items()}

    async def answer(self, message: dict[str, Any]) -> tuple[Any, AfterReply]:
        """The answer to a valid request (None for a notification) and its after_reply work.

        Runs in the request's own task: the context variable it sets is that task's."""
        after: AfterReply = []
        _AFTER_REPLY.set(after)  # the handler's task copies this task's context
        try:
            # One request at a time: jsonrpcserver gathers a batch without bound, so
            # batches are split before and only single requests reach it.
            response = await dispatch_to_serializable(
                "", self._methods, deserializer=lambda _: message, validator=_checked_already
            )
        except Exception:
            # One request must never take the connection (and the process) down with it.
            log.exception("failed to answer a request")
            response = (
                error_response(message["id"], INTERNAL_ERROR, "Internal error")
                if "id" in message
                else None
            )
        return response, after


def _checked_already(message: Any) -> None:
    """jsonrpcserver's validator: request_problem has already refused what its schema would."""


def _adapt(handler: Handler) -> Callable[..., Awaitable[Result]]:
    # jsonrpcserver binds params to the signature; **params takes any object and refuses arrays.
    async def method(**params: Any) -> Result:
        try:
            return Success(await handler(params))
        except RpcError as exc:
            return (
                Error(exc.code, exc.message, exc.data)
                if exc.data is not None
                else Error(exc.code, exc.message)
            )
        except Exception as exc:
            log.exception("handler failed")
            return Error(INTERNAL_ERROR, f"Internal error: {exc}")

    return method
