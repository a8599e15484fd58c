"""Admission of inbound requests: each runs in its own task within a budget of requests and
bytes; those read while the budget is full wait in a bounded backlog."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from acp_memory.jsonrpc.cancel import InboundRequest

# What inbound handlers may hold at once, in requests and in bytes of their lines.
MAX_IN_FLIGHT = 512
MAX_IN_FLIGHT_BYTES = 128 * 1024 * 1024
# Requests read while the handlers' budget is full wait here, so that the reader goes on
# reading: the answer to a request we sent may be right behind them, and the handlers that
# hold the budget may be waiting for exactly that answer. Once this backlog is full too, the
# reader stops (and the peer with it), which bounds memory under a burst.
MAX_WAITING = 4096
MAX_WAITING_BYTES = 64 * 1024 * 1024


class Budget:
    """Admits work while both the count and the bytes it holds stay under their bounds."""

    def __init__(self, count: int, nbytes: int) -> None:
        self._max_count, self._max_bytes = count, nbytes
        self._count = self._bytes = 0
        self._freed = anyio.Event()

    def try_acquire(self, size: int, count: int = 1) -> bool:
        # Work larger than the bounds is still admitted when nothing else is held, or it
        # could never run at all.
        if self._count and (
            self._count + count > self._max_count or self._bytes + size > self._max_bytes
        ):
            return False
        self._count += count
        self._bytes += size
        return True

    async def acquire(self, size: int, count: int = 1) -> None:
        while not self.try_acquire(size, count):
            await self._freed.wait()

    def release(self, size: int, count: int = 1) -> None:
        self._count -= count
        self._bytes -= size
        self._freed.set()
        self._freed = anyio.Event()


class BatchAnswers:
    """The answers of one batch, sent together once its last request is done."""

    __slots__ = ("after", "answers", "remaining")

    def __init__(self, size: int) -> None:
        self.answers: list[Any] = [None] * size
        self.remaining = 0
        # Its members' after_reply work: it waits for the batch's one answer.
        self.after: list[Callable[[], Awaitable[None]]] = []


class Inbound:
    """One request read and not yet answered: its message, the bytes it holds, its batch,
    and (a request, not a notification) what a `$/cancel_request` naming it acts on."""

    __slots__ = ("batch", "index", "message", "request", "size")

    def __init__(
        self,
        message: dict[str, Any],
        size: int,
        batch: BatchAnswers | None = None,
        index: int = 0,
        request: InboundRequest | None = None,
    ) -> None:
        self.message, self.size, self.batch, self.index = message, size, batch, index
        self.request = request


class Admission:
    """Starts each inbound request in the handlers' task group once the budget has room."""

    def __init__(
        self,
        handle: Callable[[Inbound], Awaitable[None]],
        *,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_in_flight_bytes: int = MAX_IN_FLIGHT_BYTES,
        max_waiting: int = MAX_WAITING,
        max_waiting_bytes: int = MAX_WAITING_BYTES,
    ) -> None:
        self._handle = handle
        self._budget = Budget(max_in_flight, max_in_flight_bytes)
        self._backlog = Budget(max_waiting, max_waiting_bytes)
        self._waiting: deque[Inbound] = deque()
        self.handlers: TaskGroup | None = None  # set while the connection serves

    async def enqueue(self, items: list[Inbound], size: int) -> None:
        """Queue requests read from one line of `size` bytes; waits while the backlog is full."""
        await self._backlog.acquire(size, len(items))
        self._waiting.extend(items)
        self._admit()

    def _admit(self) -> None:
        tg = self.handlers
        if tg is None or tg.cancel_scope.cancel_called:
            return
        while self._waiting and self._budget.try_acquire(self._waiting[0].size):
            item = self._waiting.popleft()
            self._backlog.release(item.size)
            tg.start_soon(self._run, item)

    async def _run(self, item: Inbound) -> None:
        try:
            await self._handle(item)
        finally:
            self._budget.release(item.size)
            self._admit()
