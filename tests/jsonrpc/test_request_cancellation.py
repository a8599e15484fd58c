"""`$/cancel_request`: the peer cancels one of its requests by id, and that request alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from memory_wire import Peer

from acp_memory.jsonrpc.cancel import cancel_with
from acp_memory.jsonrpc.connection import Connection
from acp_memory.jsonrpc.errors import REQUEST_CANCELLED

pytestmark = pytest.mark.anyio


def _req(msg_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}}


def _cancel(msg_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": msg_id}}


class _Handlers:
    """`hold` parks until cancelled or released; `own` answers its own cancel (cancel_with)."""

    def __init__(self) -> None:
        self.started: dict[Any, anyio.Event] = {}
        self.release = anyio.Event()
        self.ran: list[Any] = []
        self.cleaned_up: list[Any] = []

    def table(self) -> dict[str, Any]:
        return {"hold": self.hold, "own": self.own}

    async def hold(self, params: dict[str, Any]) -> Any:
        self.ran.append(params["n"])
        self.started.setdefault(params["n"], anyio.Event()).set()
        try:
            await self.release.wait()
        finally:
            self.cleaned_up.append(params["n"])
        return params["n"]

    async def own(self, params: dict[str, Any]) -> Any:
        stop = anyio.Event()
        cancel_with(stop.set)
        self.started.setdefault(params["n"], anyio.Event()).set()
        await stop.wait()
        return {"ended": "cancelled"}

    async def wait_started(self, n: Any) -> None:
        await self.started.setdefault(n, anyio.Event()).wait()


@asynccontextmanager
async def _serving(handlers: _Handlers, **limits: Any) -> AsyncIterator[Peer]:
    peer = Peer()
    conn = Connection(peer.receive_stream, peer.send_stream, handlers.table(), **limits)
    async with anyio.create_task_group() as tg:
        tg.start_soon(conn.serve)
        with anyio.fail_after(10):
            yield peer
            await peer.end()


async def test_a_running_request_named_by_cancel_request_answers_32800_and_no_other_does():
    handlers = _Handlers()
    async with _serving(handlers) as peer:
        await peer.send_json(_req(1, "hold", {"n": 1}), _req("two", "hold", {"n": 2}))
        await handlers.wait_started(1)
        await handlers.wait_started(2)
        await peer.send_json(_cancel(1))
        answer = await peer.recv()
        assert answer == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": REQUEST_CANCELLED, "message": "Request cancelled"},
        }
        assert handlers.cleaned_up == [1]  # its handler was stopped, not left running
        handlers.release.set()
        assert await peer.recv() == {"jsonrpc": "2.0", "id": "two", "result": 2}


async def test_a_handler_that_chose_cancel_with_answers_the_cancel_itself():
    handlers = _Handlers()
    async with _serving(handlers) as peer:
        await peer.send_json(_req(7, "own", {"n": 7}))
        await handlers.wait_started(7)
        await peer.send_json(_cancel(7))
        assert await peer.recv() == {"jsonrpc": "2.0", "id": 7, "result": {"ended": "cancelled"}}


async def test_a_request_cancelled_while_it_waits_for_the_budget_never_runs():
    handlers = _Handlers()
    async with _serving(handlers, max_in_flight=1) as peer:
        await peer.send_json(_req(1, "hold", {"n": 1}), _req(2, "hold", {"n": 2}))
        await handlers.wait_started(1)
        await peer.send_json(_cancel(2))
        handlers.release.set()
        answers = {m["id"]: m for m in [await peer.recv(), await peer.recv()]}
        assert answers[1]["result"] == 1
        assert answers[2]["error"]["code"] == REQUEST_CANCELLED
        assert handlers.ran == [1]


@pytest.mark.parametrize(
    "params",
    [{"requestId": 99}, {"requestId": {"not": "an id"}}, {}, None],
    ids=["unknown id", "object id", "no id", "no params"],
)
async def test_a_cancel_naming_no_running_request_gets_no_answer_and_changes_nothing(params):
    handlers = _Handlers()
    async with _serving(handlers) as peer:
        await peer.send_json(_req(1, "hold", {"n": 1}))
        await handlers.wait_started(1)
        cancel = {"jsonrpc": "2.0", "method": "$/cancel_request"}
        await peer.send_json(cancel if params is None else {**cancel, "params": params})
        await anyio.wait_all_tasks_blocked()
        handlers.release.set()
        # The first line out is the held request's answer: the cancel had none of its own.
        assert await peer.recv() == {"jsonrpc": "2.0", "id": 1, "result": 1}


async def test_a_cancel_inside_a_batch_acts_and_is_not_answered():
    handlers = _Handlers()
    async with _serving(handlers) as peer:
        await peer.send_json(_req(1, "hold", {"n": 1}))
        await handlers.wait_started(1)
        await peer.send_json([_cancel(1)])
        assert (await peer.recv())["error"]["code"] == REQUEST_CANCELLED


async def test_a_cancel_sent_as_a_request_is_answered_and_cancels_nothing():
    handlers = _Handlers()
    async with _serving(handlers) as peer:
        await peer.send_json(_req(1, "hold", {"n": 1}))
        await handlers.wait_started(1)
        await peer.send_json(_req(5, "$/cancel_request", {"requestId": 1}))
        # A request always gets its answer; only the notification acts.
        assert (await peer.recv())["id"] == 5
        handlers.release.set()
        assert await peer.recv() == {"jsonrpc": "2.0", "id": 1, "result": 1}


async def test_a_cancel_names_the_newest_request_of_a_reused_id_after_the_older_ended():
    handlers = _Handlers()
    async with _serving(handlers) as peer:
        await peer.send_json(_req(1, "hold", {"n": 1}))
        await handlers.wait_started(1)
        await peer.send_json(_req(1, "own", {"n": 2}))
        await handlers.wait_started(2)
        handlers.release.set()
        assert await peer.recv() == {"jsonrpc": "2.0", "id": 1, "result": 1}
        # The older one's end left the newer one nameable.
        await peer.send_json(_cancel(1))
        assert await peer.recv() == {"jsonrpc": "2.0", "id": 1, "result": {"ended": "cancelled"}}
