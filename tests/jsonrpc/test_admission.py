"""Admission of inbound requests: the handlers' budget, the backlog behind it, and batches."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from memory_wire import Peer

from acp_memory.jsonrpc.connection import Connection
from acp_memory.jsonrpc.dispatch import after_reply

pytestmark = pytest.mark.anyio


def _req(msg_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    return message if params is None else {**message, "params": params}


def _note(method: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method}


@asynccontextmanager
async def _serving(
    make: Callable[[Peer], Connection],
) -> AsyncIterator[tuple[Connection, Peer]]:
    peer = Peer()
    conn = make(peer)
    async with anyio.create_task_group() as tg:
        tg.start_soon(conn.serve)
        with anyio.fail_after(10):
            yield conn, peer
            await peer.end()


class _Gate:
    """Handlers that park until the test opens the gate, counting how many got to run."""

    def __init__(self) -> None:
        self.opened = anyio.Event()
        self.started = 0

    async def hold(self, params: dict[str, Any]) -> Any:
        self.started += 1
        await self.opened.wait()
        return params.get("n")


async def test_a_handler_waiting_on_the_peer_gets_its_answer_while_the_budget_is_full():
    # Two handlers fill the budget, each waiting for the peer's answer to its own request;
    # a third request is read before those answers, which must still get through.
    async def ask(params: dict[str, Any]) -> Any:
        return await conn.request("client/ping", params)

    async with _serving(
        lambda p: Connection(p.receive_stream, p.send_stream, {"ask": ask}, max_in_flight=2)
    ) as (conn, peer):
        await peer.send_json(*(_req(n, "ask", {"n": n}) for n in (1, 2, 3)))
        asked = [await peer.recv(), await peer.recv()]
        assert sorted(m["params"]["n"] for m in asked) == [1, 2]
        await peer.send_json(
            *({"jsonrpc": "2.0", "id": m["id"], "result": m["params"]} for m in asked)
        )
        answers: dict[int, Any] = {}
        while len(answers) < 3:
            msg = await peer.recv()
            if msg.get("method") == "client/ping":
                assert msg["params"] == {"n": 3}
                await peer.send_json({"jsonrpc": "2.0", "id": msg["id"], "result": {"n": 3}})
            else:
                answers[msg["id"]] = msg["result"]
        assert answers == {n: {"n": n} for n in (1, 2, 3)}


@pytest.mark.parametrize(
    ("max_waiting", "max_waiting_bytes"),
    [(1, 1 << 20), (100, 60)],
    ids=["by-count", "by-bytes"],
)
async def test_the_reader_stops_once_requests_waiting_for_the_budget_fill_the_backlog(
    max_waiting: int, max_waiting_bytes: int
):
    gate = _Gate()
    async with _serving(
        lambda p: Connection(
            p.receive_stream,
            p.send_stream,
            {"hold": gate.hold},
            max_in_flight=1,
            max_waiting=max_waiting,
            max_waiting_bytes=max_waiting_bytes,
        )
    ) as (_conn, peer):
        # Each request line is about 60 bytes: one runs, one waits, the third finds the
        # backlog full, and the reader stops right after taking it.
        for n in (1, 2, 3):
            await peer.send_json(_req(n, "hold", {"n": n}))
        taken = anyio.Event()

        async def send_fourth() -> None:
            await peer.send_json(_req(4, "hold", {"n": 4}))
            taken.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(send_fourth)
            await anyio.wait_all_tasks_blocked()
            assert not taken.is_set() and gate.started == 1
            gate.opened.set()
        results = [(await peer.recv())["result"] for _ in range(4)]
        assert sorted(results) == [1, 2, 3, 4]


async def test_each_request_of_a_batch_takes_its_own_place_in_the_budget():
    gate = _Gate()
    async with _serving(
        lambda p: Connection(p.receive_stream, p.send_stream, {"hold": gate.hold}, max_in_flight=2)
    ) as (_conn, peer):
        await peer.send_json([_req(n, "hold", {"n": n}) for n in (1, 2, 3)])
        await anyio.wait_all_tasks_blocked()
        assert gate.started == 2
        gate.opened.set()
        answer = await peer.recv()
        assert [(a["id"], a["result"]) for a in answer] == [(1, 1), (2, 2), (3, 3)]
        assert gate.started == 3


async def test_a_batch_over_the_cap_is_refused_whole_with_its_size_and_the_cap():
    gate = _Gate()
    gate.opened.set()
    async with _serving(
        lambda p: Connection(p.receive_stream, p.send_stream, {"hold": gate.hold}, max_batch=3)
    ) as (_conn, peer):
        await peer.send_json([_req(n, "hold", {"n": n}) for n in range(4)])
        answer = await peer.recv()
        assert answer["id"] is None and answer["error"]["code"] == -32600
        assert answer["error"]["message"] == "batch of 4 requests exceeds 3"
        await peer.send_json([_req(n, "hold", {"n": n}) for n in range(3)])
        assert [a["result"] for a in await peer.recv()] == [0, 1, 2]
        assert gate.started == 3


async def test_a_batch_answers_each_request_in_order_and_nothing_for_the_rest():
    async def echo(params: dict[str, Any]) -> Any:
        return params

    outcome: dict[str, Any] = {}

    async with _serving(
        lambda p: Connection(p.receive_stream, p.send_stream, {"echo": echo, "note": echo})
    ) as (conn, peer):

        async def ask() -> None:
            outcome["answer"] = await conn.request("client/thing", {})

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            ours = await peer.recv()
            await peer.send_json(
                [
                    _req("a", "echo", {"k": 1}),
                    {"jsonrpc": "2.0", "id": 5, "method": 7},
                    _note("note"),
                    {"jsonrpc": "2.0", "id": ours["id"], "result": "theirs"},
                    42,
                    _req(None, "echo", {"k": 2}),
                ]
            )
        assert outcome == {"answer": "theirs"}
        answer = await peer.recv()
        assert [(a["id"], a.get("result"), a.get("error", {}).get("code")) for a in answer] == [
            ("a", {"k": 1}, None),
            (5, None, -32600),
            (None, None, -32600),
            (None, {"k": 2}, None),
        ]
        # Notifications and responses alone get no answer: the next line is the next answer.
        await peer.send_json([_note("note"), _note("note")])
        await peer.send_json(_req(6, "echo", {}))
        assert (await peer.recv())["id"] == 6


async def test_an_empty_batch_is_one_invalid_request():
    async with _serving(lambda p: Connection(p.receive_stream, p.send_stream, {})) as (_c, peer):
        await peer.send(b"[]\n")
        answer = await peer.recv()
        assert answer["id"] is None and answer["error"]["code"] == -32600


async def test_answers_to_our_requests_are_taken_from_a_batch_of_any_size():
    got: list[Any] = []
    async with _serving(lambda p: Connection(p.receive_stream, p.send_stream, {}, max_batch=2)) as (
        conn,
        peer,
    ):
        async with anyio.create_task_group() as tg:
            for n in range(3):
                tg.start_soon(lambda n=n: _ask_into(conn, n, got))
            asked = [await peer.recv() for _ in range(3)]
            await peer.send_json(
                [{"jsonrpc": "2.0", "id": m["id"], "result": m["params"]["n"]} for m in asked]
            )
        assert sorted(got) == [0, 1, 2]


async def _ask_into(conn: Connection, n: int, into: list[Any]) -> None:
    into.append(await conn.request("client/n", {"n": n}))


async def test_after_reply_work_follows_the_answer_and_a_batch_answer_as_a_whole():
    # The member that finishes first asks for a notification: it must wait for the batch's
    # one answer, or the peer would see it before the answer it depends on.
    gate = _Gate()

    async def first(params: dict[str, Any]) -> Any:
        after_reply(lambda: conn.notify("after", params))
        return "first"

    async with _serving(
        lambda p: Connection(p.receive_stream, p.send_stream, {"first": first, "hold": gate.hold})
    ) as (conn, peer):
        await peer.send_json(_req(1, "first", {"k": 1}))
        assert (await peer.recv())["id"] == 1
        assert (await peer.recv())["method"] == "after"
        await peer.send_json([_req(2, "first", {"k": 2}), _req(3, "hold", {"n": 3})])
        await anyio.wait_all_tasks_blocked()
        gate.opened.set()
        assert [a["id"] for a in await peer.recv()] == [2, 3]
        assert await peer.recv() == {"jsonrpc": "2.0", "method": "after", "params": {"k": 2}}
