"""An invalid request is answered with its own id whenever that id can be read."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest
from memory_wire import Peer

from acp_memory.jsonrpc.connection import Connection

pytestmark = pytest.mark.anyio

_READABLE = object()  # the expected answer id is the message's own


@pytest.mark.parametrize(
    ("message", "answer_id"),
    [
        ({"jsonrpc": "2.0", "id": 9001, "method": 42}, _READABLE),
        ({"jsonrpc": "2.0", "id": "abc"}, _READABLE),
        ({"jsonrpc": "1.0", "id": "v1", "method": "echo"}, _READABLE),
        ({"id": 3, "method": "echo"}, _READABLE),
        ({"jsonrpc": "2.0", "id": 2.5, "method": "echo", "params": "flat"}, _READABLE),
        ({"jsonrpc": "2.0", "id": -7, "method": "echo", "extra": True}, _READABLE),
        ({"jsonrpc": "2.0", "id": None, "method": None}, None),
        ({"jsonrpc": "2.0", "method": 42}, None),
        ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "echo"}, None),
        ({"jsonrpc": "2.0", "id": [1], "method": "echo"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "echo"}, None),
        ("a string", None),
        (42, None),
    ],
    ids=[
        "method-not-a-string",
        "no-method",
        "wrong-jsonrpc",
        "no-jsonrpc",
        "params-not-structured",
        "unknown-member",
        "null-id",
        "no-id",
        "object-id",
        "array-id",
        "bool-id",
        "string",
        "number",
    ],
)
async def test_an_invalid_request_is_answered_with_its_id_when_it_has_a_valid_one(
    message: Any, answer_id: Any
):
    ran: list[dict[str, Any]] = []

    async def echo(params: dict[str, Any]) -> Any:
        ran.append(params)
        return params

    expected = message["id"] if answer_id is _READABLE else None
    peer = Peer()
    conn = Connection(peer.receive_stream, peer.send_stream, {"echo": echo})
    async with anyio.create_task_group() as tg:
        tg.start_soon(conn.serve)
        with anyio.fail_after(5):
            await peer.send_json(message)
            answer = await peer.recv()
            await peer.end()
    assert "id" in answer and answer["id"] == expected
    assert type(answer["id"]) is type(expected)
    assert answer["error"]["code"] == -32600 and answer["error"]["message"]
    assert ran == []


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":NaN,"method":"echo"}',
        b'{"jsonrpc":"2.0","id":1e999,"method":"echo"}',
    ],
    ids=["nan", "infinity"],
)
async def test_an_id_with_no_json_spelling_is_answered_with_null(line: bytes):
    peer = Peer()
    conn = Connection(peer.receive_stream, peer.send_stream, {})
    async with anyio.create_task_group() as tg:
        tg.start_soon(conn.serve)
        with anyio.fail_after(5):
            await peer.send(line + b"\n")
            answer = await peer.recv()  # strict JSON: NaN or Infinity would not parse
            await peer.end()
    assert answer["id"] is None and answer["error"]["code"] == -32600


async def test_a_valid_request_after_an_invalid_one_is_served(caplog: pytest.LogCaptureFixture):
    async def echo(params: dict[str, Any]) -> Any:
        return params

    peer = Peer()
    conn = Connection(peer.receive_stream, peer.send_stream, {"echo": echo})
    caplog.set_level(logging.DEBUG)
    async with anyio.create_task_group() as tg:
        tg.start_soon(conn.serve)
        with anyio.fail_after(5):
            await peer.send(
                json.dumps({"jsonrpc": "2.0", "id": 1, "method": 1}).encode()
                + b"\n"
                + json.dumps(
                    {"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"a": 1}}
                ).encode()
                + b"\n"
            )
            assert (await peer.recv())["id"] == 1
            assert await peer.recv() == {"jsonrpc": "2.0", "id": 2, "result": {"a": 1}}
            await peer.end()
    assert not [r for r in caplog.records if r.exc_info]
