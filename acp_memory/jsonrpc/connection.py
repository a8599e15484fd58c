"""A JSON-RPC 2.0 peer over newline-delimited byte streams.

Inbound requests run concurrently, each in its own task, so a long request never blocks a
notification, another request, or the answer to a request we sent. Method lookup, params
binding and handler errors are jsonrpcserver's (dispatch.py); framing, validation
(messages.py), batches, admission (admission.py), correlation (correlation.py) and the
batched writes (outbox.py) are ours.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from acp_memory.jsonrpc.admission import (
    MAX_IN_FLIGHT,
    MAX_IN_FLIGHT_BYTES,
    MAX_WAITING,
    MAX_WAITING_BYTES,
    Admission,
    BatchAnswers,
    Inbound,
)
from acp_memory.jsonrpc.cancel import CANCEL_REQUEST, InboundRequests
from acp_memory.jsonrpc.correlation import OutboundRequests
from acp_memory.jsonrpc.dispatch import AfterReply, Handler, Methods
from acp_memory.jsonrpc.errors import INVALID_REQUEST, PARSE_ERROR, REQUEST_CANCELLED
from acp_memory.jsonrpc.framing import DEFAULT_MAX_LINE_BYTES, OversizedLine, input_lines
from acp_memory.jsonrpc.messages import error_response, is_response, readable_id, request_problem
from acp_memory.jsonrpc.outbox import Outbox

log = logging.getLogger(__name__)

# Members of one batch; each takes its own place in the backlog and the budget.
MAX_BATCH = 256


class Connection:
    """One JSON-RPC peer: serve() reads until the input ends; request()/notify() send."""

    def __init__(
        self,
        receive: ByteReceiveStream,
        send: ByteSendStream,
        handlers: Mapping[str, Handler],
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        on_input_closed: Callable[[], None] = lambda: None,
        drain_seconds: float = 10.0,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_in_flight_bytes: int = MAX_IN_FLIGHT_BYTES,
        max_waiting: int = MAX_WAITING,
        max_waiting_bytes: int = MAX_WAITING_BYTES,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._receive = receive
        self._methods = Methods(handlers)
        self._max_line = max_line_bytes
        self._on_input_closed = on_input_closed
        self._drain_seconds = drain_seconds
        self._outbox = Outbox(send)
        self._requests = OutboundRequests(self._outbox.post)
        self._inbound = InboundRequests()
        self._admission = Admission(
            self._dispatch,
            max_in_flight=max_in_flight,
            max_in_flight_bytes=max_in_flight_bytes,
            max_waiting=max_waiting,
            max_waiting_bytes=max_waiting_bytes,
        )
        self._max_batch = max_batch

    async def serve(self) -> None:
        """Read and dispatch until the input ends, then drain in-flight requests (bounded)."""
        try:
            async with anyio.create_task_group() as writer_tg:
                writer_tg.start_soon(self._outbox.run)
                async with anyio.create_task_group() as tg:
                    self._admission.handlers = tg
                    await self._read()
                    # Requests already read still get their answers: the owner stops long
                    # work (turns), answers we wait for will never come, and the rest get a
                    # bounded time to finish.
                    self._on_input_closed()
                    self._requests.close()
                    tg.cancel_scope.deadline = anyio.current_time() + self._drain_seconds
                await self._outbox.aclose()
                # What is queued goes out, unless the peer stopped reading: then we leave.
                writer_tg.cancel_scope.deadline = anyio.current_time() + self._drain_seconds
        finally:
            self._requests.close()

    async def request(self, method: str, params: Any) -> Any:
        """Send a request to the peer and wait for its answer; raises RpcError on an error."""
        return await self._requests.request(method, params)

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification to the peer."""
        await self._outbox.post({"jsonrpc": "2.0", "method": method, "params": params})

    async def _read(self) -> None:
        lines = input_lines(self._receive, self._max_line, "input")
        async with contextlib.aclosing(lines):
            async for line in lines:
                await self._on_line(line)

    async def _on_line(self, line: bytes | OversizedLine) -> None:
        if isinstance(line, OversizedLine):
            await self._reply_error(
                None, INVALID_REQUEST, f"message of {line.size} bytes exceeds {self._max_line}"
            )
            return
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError as exc:  # includes invalid UTF-8
            await self._reply_error(None, PARSE_ERROR, f"Parse error: {exc}")
            return
        if isinstance(message, list):
            await self._on_batch(message, len(line))
        elif is_response(message):
            self._requests.resolve(message)
        elif (problem := request_problem(message)) is not None:
            await self._reply_error(readable_id(message), INVALID_REQUEST, problem)
        elif not self._took_cancel(message):
            await self._admission.enqueue([self._inbound_item(message, len(line))], len(line))

    def _took_cancel(self, message: dict[str, Any]) -> bool:
        """A `$/cancel_request` acts at once, as it is read: it must not wait behind the
        requests it may be cancelling."""
        if message["method"] != CANCEL_REQUEST or "id" in message:
            return False
        self._inbound.cancel(message.get("params"))
        return True

    def _inbound_item(
        self, message: dict[str, Any], size: int, batch: BatchAnswers | None = None, index: int = 0
    ) -> Inbound:
        request = self._inbound.add(message["id"]) if "id" in message else None
        return Inbound(message, size, batch, index, request)

    async def _on_batch(self, members: list[Any], size: int) -> None:
        if not members:
            await self._reply_error(None, INVALID_REQUEST, "Invalid request: empty batch")
            return
        # Answers to our own requests cost no budget, so they are taken from any batch.
        others: list[tuple[int, Any]] = []
        for index, member in enumerate(members):
            if is_response(member):
                self._requests.resolve(member)
            else:
                others.append((index, member))
        if len(others) > self._max_batch:
            await self._reply_error(
                None, INVALID_REQUEST, f"batch of {len(others)} requests exceeds {self._max_batch}"
            )
            return
        batch = BatchAnswers(len(members))
        requests: list[tuple[int, dict[str, Any]]] = []
        for index, member in others:
            if (problem := request_problem(member)) is not None:
                batch.answers[index] = error_response(readable_id(member), INVALID_REQUEST, problem)
            elif not self._took_cancel(member):
                requests.append((index, member))
        if not requests:
            await self._post_batch(batch)
            return
        # The line's bytes are shared among its requests, so the budget holds them all.
        share, extra = divmod(size, len(requests))
        inbound = [
            self._inbound_item(member, share + (n < extra), batch, index)
            for n, (index, member) in enumerate(requests)
        ]
        batch.remaining = len(inbound)
        await self._admission.enqueue(inbound, size)

    async def _dispatch(self, item: Inbound) -> None:
        response, after = await self._answer(item)
        if item.batch is None:
            if response is not None:
                await self._outbox.post(response)
        else:
            batch = item.batch
            batch.answers[item.index] = response
            batch.after += after
            batch.remaining -= 1
            if batch.remaining:
                after = []  # the last member to finish runs the batch's work
            else:
                await self._post_batch(batch)
                after = batch.after
        for work in after:
            try:
                await work()
            except Exception:
                log.exception("failed to finish a request after its answer")

    async def _answer(self, item: Inbound) -> tuple[Any, AfterReply]:
        """The handler's answer, or -32800 when a `$/cancel_request` stopped it (before it
        ran, or by cancelling it: a handler that chose cancel_with answers itself)."""
        request = item.request
        if request is None:  # a notification: no one can name it
            return await self._methods.answer(item.message)
        msg_id = item.message["id"]
        try:
            # Cancelled while it waited for the budget, its scope stops it before it runs.
            with self._inbound.running(request):
                return await self._methods.answer(item.message)
        finally:
            self._inbound.done(msg_id, request)
        # Reached only when its scope stopped the handler.
        return error_response(msg_id, REQUEST_CANCELLED, "Request cancelled"), []

    async def _post_batch(self, batch: BatchAnswers) -> None:
        answers = [a for a in batch.answers if a is not None]
        if answers:  # a batch of notifications and responses gets no answer at all
            await self._outbox.post(answers)

    async def _reply_error(self, msg_id: Any, code: int, message: str) -> None:
        await self._outbox.post(error_response(msg_id, code, message))


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
