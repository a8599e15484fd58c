"""The JSON-RPC peer in both directions: two Connections over a socket pair."""

from __future__ import annotations

import errno
import logging
import socket
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from memory_wire import Peer

from acp_memory.jsonrpc.connection import Connection
from acp_memory.jsonrpc.errors import RpcError
from acp_memory.jsonrpc.fdstream import FdReceiveStream, FdSendStream

pytestmark = pytest.mark.anyio


def _pair(left_handlers: dict[str, Any], right_handlers: dict[str, Any]):
    a, b = socket.socketpair()
    left = Connection(FdReceiveStream(a.fileno()), FdSendStream(a.fileno()), left_handlers)
    right = Connection(FdReceiveStream(b.fileno()), FdSendStream(b.fileno()), right_handlers)
    return left, right, (a, b)


async def test_a_handler_can_ask_the_peer_and_use_its_answer_while_other_requests_flow():
    release = anyio.Event()

    async def ping(params: dict[str, Any]) -> dict[str, Any]:
        await release.wait()
        return {"pong": params["n"]}

    async def ask_back(params: dict[str, Any]) -> dict[str, Any]:
        answer = await agent.request("client/ping", {"n": params["n"]})
        return {"got": answer["pong"]}

    async def quick(params: dict[str, Any]) -> str:
        return "fast"

    agent, client, socks = _pair({"ask": ask_back, "quick": quick}, {"client/ping": ping})
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.serve)
        tg.start_soon(client.serve)
        results: dict[str, Any] = {}
        answered = anyio.Event()

        async def call_ask() -> None:
            results["ask"] = await client.request("ask", {"n": 7})
            answered.set()

        tg.start_soon(call_ask)
        with anyio.fail_after(5):
            # "ask" is parked on the client's answer; other requests are still served.
            assert await client.request("quick", {}) == "fast"
            release.set()
            await answered.wait()
        assert results["ask"] == {"got": 7}
        for s in socks:
            s.shutdown(socket.SHUT_WR)


async def test_an_error_answer_raises_rpc_error_with_its_code():
    async def fail(params: dict[str, Any]) -> None:
        raise RpcError(-32002, "no such thing", {"what": "x"})

    left, right, socks = _pair({}, {"fail": fail})
    async with anyio.create_task_group() as tg:
        tg.start_soon(left.serve)
        tg.start_soon(right.serve)
        with anyio.fail_after(5), pytest.raises(RpcError) as err:
            await left.request("fail", {})
        assert (err.value.code, err.value.message, err.value.data) == (
            -32002,
            "no such thing",
            {"what": "x"},
        )
        for s in socks:
            s.shutdown(socket.SHUT_WR)


async def test_an_unexpected_handler_failure_is_an_internal_error_not_a_crash():
    async def boom(params: dict[str, Any]) -> None:
        raise ValueError("kaput")

    left, right, socks = _pair({}, {"boom": boom, "ok": lambda p: _ok()})
    async with anyio.create_task_group() as tg:
        tg.start_soon(left.serve)
        tg.start_soon(right.serve)
        with anyio.fail_after(5):
            with pytest.raises(RpcError) as err:
                await left.request("boom", {})
            assert err.value.code == -32603 and "kaput" in err.value.message
            assert await left.request("ok", {}) == "ok"
        for s in socks:
            s.shutdown(socket.SHUT_WR)


async def _ok() -> str:
    return "ok"


async def test_pending_requests_fail_when_the_peer_goes_away():
    arrived = anyio.Event()

    async def never(params: dict[str, Any]) -> None:
        arrived.set()
        await anyio.sleep_forever()

    left, right, (_a, b) = _pair({}, {"never": never})
    async with anyio.create_task_group() as tg:
        tg.start_soon(left.serve)
        right_scope = anyio.CancelScope()

        async def run_right() -> None:
            with right_scope:
                await right.serve()

        tg.start_soon(run_right)
        outcome: dict[str, Any] = {}
        failed = anyio.Event()

        async def call() -> None:
            try:
                await left.request("never", {})
            except RpcError as exc:
                outcome["error"] = exc
                failed.set()

        tg.start_soon(call)
        with anyio.fail_after(15):
            await arrived.wait()
            right_scope.cancel()
            b.close()  # the peer is gone: left's input ends
            await failed.wait()
        assert "closed" in outcome["error"].message


async def test_handlers_are_admitted_within_a_count_and_a_byte_budget():
    from acp_memory.jsonrpc.admission import Budget

    budget = Budget(count=2, nbytes=100)
    await budget.acquire(60)
    admitted: list[int] = []

    async def take(size: int) -> None:
        await budget.acquire(size)
        admitted.append(size)

    async with anyio.create_task_group() as tg:
        tg.start_soon(take, 50)  # 60 + 50 bytes is over the budget: it waits
        await anyio.wait_all_tasks_blocked()
        assert admitted == []
        budget.release(60)
        await anyio.wait_all_tasks_blocked()
        assert admitted == [50]
        await budget.acquire(10)  # the second slot
        tg.start_soon(take, 1)  # the count is full: it waits however small
        await anyio.wait_all_tasks_blocked()
        assert admitted == [50]
        budget.release(10)
    assert admitted == [50, 1]


async def test_one_message_over_the_byte_budget_still_runs_alone():
    from acp_memory.jsonrpc.admission import Budget

    budget = Budget(count=4, nbytes=10)
    with anyio.fail_after(10):
        await budget.acquire(500)
    admitted = anyio.Event()

    async def take_one_byte() -> None:
        await budget.acquire(1)
        admitted.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(take_one_byte)  # a free count slot, yet the bytes are all taken
        await anyio.wait_all_tasks_blocked()
        assert not admitted.is_set()
        budget.release(500)
        with anyio.fail_after(10):
            await admitted.wait()


async def test_serving_ends_when_input_ends_even_if_the_peer_never_reads():
    async def big(params: dict[str, Any]) -> str:
        return "x" * 100_000

    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    conn = Connection(
        FdReceiveStream(a.fileno()), FdSendStream(a.fileno()), {"big": big}, drain_seconds=0.2
    )
    request = b'{"jsonrpc":"2.0","id":1,"method":"big"}\n'
    b.sendall(request * 50)  # ~5 MB of answers that nobody will read
    b.shutdown(socket.SHUT_WR)
    with anyio.fail_after(10):
        await conn.serve()
    a.close()
    b.close()


@pytest.mark.parametrize(
    "failure",
    [anyio.BrokenResourceError(), OSError(errno.EIO, "Input/output error")],
    ids=["broken-resource", "eio"],
)
async def test_a_broken_input_ends_serving_as_the_end_of_input_does(
    failure: BaseException, caplog: pytest.LogCaptureFixture
):
    release = anyio.Event()
    closed: list[bool] = []

    async def slow(params: dict[str, Any]) -> str:
        await release.wait()
        return "finished"

    def on_input_closed() -> None:
        closed.append(True)
        release.set()  # as the agent stops its turns

    peer = Peer()
    conn = Connection(
        peer.receive_stream, peer.send_stream, {"slow": slow}, on_input_closed=on_input_closed
    )
    outcome: dict[str, Any] = {}
    caplog.set_level(logging.INFO, logger="acp_memory.jsonrpc")

    async def ask_peer() -> None:
        with pytest.raises(RpcError) as err:
            await conn.request("client/never_answered", {})
        outcome["error"] = err.value

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(conn.serve)
            tg.start_soon(ask_peer)
            assert (await peer.recv())["method"] == "client/never_answered"
            await peer.send_json({"jsonrpc": "2.0", "id": "s", "method": "slow"})
            await anyio.wait_all_tasks_blocked()
            await peer.fail(failure)
        # serve() returned by itself: the pending request failed and the handler was drained.
        assert closed == [True]
        assert "closed" in outcome["error"].message
        assert await peer.recv() == {"jsonrpc": "2.0", "id": "s", "result": "finished"}
    failed = [r for r in caplog.records if "input failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info is None
    assert not [r for r in caplog.records if r.exc_info]


async def test_a_streamed_burst_of_notifications_goes_out_in_few_writes():
    # A streaming turn posts a chunk every loop iteration or two; a write (a system call and
    # a wakeup of the peer) per chunk would cap the stream's rate.
    async def stream(params: dict[str, Any]) -> str:
        for i in range(500):
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
            await conn.notify("tick", {"i": i})
        return "done"

    peer = Peer()
    conn = Connection(peer.receive_stream, peer.send_stream, {"stream": stream})
    async with anyio.create_task_group() as tg:
        tg.start_soon(conn.serve)
        with anyio.fail_after(10):
            await peer.send_json({"jsonrpc": "2.0", "id": 1, "method": "stream"})
            ticks = [(await peer.recv())["params"]["i"] for _ in range(500)]
            assert await peer.recv() == {"jsonrpc": "2.0", "id": 1, "result": "done"}
            await peer.end()
    assert ticks == list(range(500))
    assert peer.writes <= 10
