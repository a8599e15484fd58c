"""`$/cancel_request`: the peer cancels one of its requests by id. A request still waiting for
the budget never runs; a running handler is cancelled, unless it said how it ends itself
(cancel_with); the answer is then the handler's own, else error -32800."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import anyio

log = logging.getLogger(__name__)

CANCEL_REQUEST = "$/cancel_request"
_NO_ID = object()  # requestId missing (null is an id a request may have)


class InboundRequest:
    """One request of the peer, from the moment it is read until it is answered."""

    __slots__ = ("on_cancel", "scope")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.on_cancel: Callable[[], None] | None = None

    def cancel(self) -> None:
        if self.on_cancel is not None:
            self.on_cancel()
        else:
            self.scope.cancel()


# The request whose handler runs in this task (a handler's task copies its context).
_CURRENT: ContextVar[InboundRequest | None] = ContextVar("_CURRENT", default=None)


def cancel_with(action: Callable[[], None]) -> None:
    """A `$/cancel_request` naming the request being handled calls `action` (at each
    such cancel: it must bear a second call) instead of cancelling its handler, which then
    ends its work and answers as it sees fit.
    Outside a request handler, nothing."""
    current = _CURRENT.get()
    if current is not None:
        current.on_cancel = action


class InboundRequests:
    """The peer's requests read and not yet answered, by id."""

    def __init__(self) -> None:
        self._by_id: dict[Any, InboundRequest] = {}

    def add(self, msg_id: Any) -> InboundRequest:
        # A client that reuses an id in flight cancels the newest request of that id.
        request = self._by_id[msg_id] = InboundRequest()
        return request

    def done(self, msg_id: Any, request: InboundRequest) -> None:
        if self._by_id.get(msg_id) is request:
            del self._by_id[msg_id]

    @contextlib.contextmanager
    def running(self, request: InboundRequest) -> Iterator[None]:
        """The handler of `request` runs inside this: its scope, and cancel_with's target."""
        token = _CURRENT.set(request)
        try:
            with request.scope:
                yield
        finally:
            _CURRENT.reset(token)

    def cancel(self, params: Any) -> None:
        """Act on a `$/cancel_request` (it gets no answer of its own): an unknown or finished
        id is ignored, as the protocol allows."""
        msg_id = params.get("requestId", _NO_ID) if isinstance(params, dict) else _NO_ID
        try:
            request = self._by_id.get(msg_id)
        except TypeError:  # an object or array as the id: no request has it
            request = None
        if request is None:
            log.debug("%s for no running request: %r", CANCEL_REQUEST, msg_id)
            return
        request.cancel()
