"""Malformed input, byte by byte: each gets a clear answer and the server keeps going."""

from __future__ import annotations

import json

import anyio
import pytest
from harness import raw_agent

pytestmark = pytest.mark.anyio

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


async def _still_serving(peer, msg_id: int = 99) -> None:
    resp = await peer.call("initialize", {"protocolVersion": 1}, msg_id=msg_id)
    assert resp["id"] == msg_id and resp["result"]["protocolVersion"] == 1


async def test_not_json_gets_parse_error_with_null_id(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        await peer.send(b"this is not json\n")
        resp = await peer.recv()
        assert resp["id"] is None and resp["error"]["code"] == -32700
        await _still_serving(peer)


@pytest.mark.parametrize(
    ("message", "answer_id"),
    [
        ("a string", None),
        (42, None),
        (
            {"jsonrpc": "1.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
            1,
        ),
        ({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}}, 1),
        ({"jsonrpc": "2.0", "id": 9001, "method": 42}, 9001),
        ({"jsonrpc": "2.0", "id": "p", "method": "initialize", "params": 1}, "p"),
    ],
    ids=[
        "string",
        "number",
        "wrong-jsonrpc",
        "no-jsonrpc",
        "method-not-a-string",
        "params-not-structured",
    ],
)
async def test_a_message_that_is_not_a_request_object_gets_invalid_request(
    cfg, paths, message, answer_id
):
    async with raw_agent(cfg, paths) as peer:
        await peer.send_json(message)
        resp = await peer.recv()
        assert resp["id"] == answer_id and resp["error"]["code"] == -32600
        await _still_serving(peer)


async def test_a_batch_of_non_requests_gets_one_invalid_request_per_member(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        await peer.send_json([1, 2])
        resp = await peer.recv()
        assert [(r["id"], r["error"]["code"]) for r in resp] == [(None, -32600), (None, -32600)]
        await _still_serving(peer)


async def test_unknown_method_gets_method_not_found(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        resp = await peer.call("session/frobnicate", {}, msg_id=7)
        assert resp["id"] == 7 and resp["error"]["code"] == -32601


async def test_unknown_underscore_notification_is_ignored(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        await peer.send_json({"jsonrpc": "2.0", "method": "_zed/hello", "params": {"x": 1}})
        await _still_serving(peer, msg_id=3)  # the very next line is the initialize answer


async def test_unknown_underscore_request_gets_method_not_found(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        resp = await peer.call("_vendor/thing", {}, msg_id=4)
        assert resp["id"] == 4 and resp["error"]["code"] == -32601


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("initialize", {}, "protocolVersion"),
        ("initialize", {"protocolVersion": -5}, "protocolVersion"),
        ("initialize", {"protocolVersion": "1"}, "protocolVersion"),
        ("session/new", {"cwd": "/x", "mcpServers": [{"command": "srv"}]}, "mcpServers.0.name"),
        ("session/new", {"cwd": "/x", "mcpServers": "none"}, "mcpServers"),
        ("session/new", {"mcpServers": []}, "cwd"),
        ("session/prompt", {"sessionId": "sess_x"}, "prompt"),
        ("session/prompt", {"sessionId": "s", "prompt": [{"type": "text"}]}, "text"),
        ("session/set_mode", {"sessionId": "s"}, "modeId"),
    ],
)
async def test_params_of_the_wrong_shape_name_the_field(cfg, paths, method, params, field):
    async with raw_agent(cfg, paths) as peer:
        resp = await peer.call(method, params, msg_id=5)
        assert resp["id"] == 5 and resp["error"]["code"] == -32602
        assert field in resp["error"]["message"]


async def test_positional_params_are_invalid_params(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        resp = await peer.call("initialize", [1], msg_id=5)
        assert resp["id"] == 5 and resp["error"]["code"] == -32602


async def test_relative_cwd_is_refused(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        resp = await peer.call("session/new", {"cwd": "relative/dir", "mcpServers": []})
        assert resp["error"]["code"] == -32602 and "absolute" in resp["error"]["message"]


async def test_unknown_session_id_is_resource_not_found(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        for method, extra in [
            ("session/prompt", {"prompt": [{"type": "text", "text": "hi"}]}),
            ("session/set_mode", {"modeId": "ask"}),
            ("session/load", {"cwd": str(paths.cwd), "mcpServers": []}),
        ]:
            resp = await peer.call(method, {"sessionId": "sess_0123456789abcdef01234567", **extra})
            assert resp["error"]["code"] == -32002, method
            resp = await peer.call(method, {"sessionId": "../../etc", **extra})
            assert resp["error"]["code"] == -32002, method


async def test_invalid_utf8_is_a_parse_error_and_the_server_stays_up(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        await peer.send(
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"\xff\xfe"}}\n'
        )
        resp = await peer.recv()
        assert resp["error"]["code"] == -32700 and resp["id"] is None
        await _still_serving(peer)


async def test_a_nul_byte_is_a_parse_error_and_the_server_stays_up(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        await peer.send(b'{"jsonrpc":"2.0","id":1,\x00"method":"initialize"}\n')
        resp = await peer.recv()
        assert resp["id"] is None and resp["error"]["code"] == -32700
        await _still_serving(peer)


async def test_empty_and_blank_lines_are_skipped(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        await peer.send(b"\n\n   \n\r\n")
        await _still_serving(peer, msg_id=1)


async def test_a_50_mb_line_is_answered_and_the_server_stays_up(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        await peer.send(b"x" * (50 * 1024 * 1024) + b"\n")
        assert (await peer.recv(timeout=60))["error"]["code"] == -32700
        await _still_serving(peer)


async def test_a_line_over_the_limit_is_dropped_with_an_error_and_the_next_is_served(cfg, paths):
    from acp_memory.jsonrpc import framing

    async with raw_agent(cfg, paths) as peer:
        await peer.send(b"y" * (framing.DEFAULT_MAX_LINE_BYTES + 10) + b"\n")
        resp = await peer.recv(timeout=60)
        assert resp["error"]["code"] == -32600 and "exceeds" in resp["error"]["message"]
        await _still_serving(peer)


async def test_a_20_mb_prompt_is_read_whole(cfg, paths):
    text = "z" * (20 * 1024 * 1024)
    async with raw_agent(cfg, paths) as peer:
        sid = (await peer.call("session/new", {"cwd": str(paths.cwd), "mcpServers": []}))["result"][
            "sessionId"
        ]
        await peer.send_json(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
            }
        )
        while "result" not in (msg := await peer.recv(timeout=60)):
            assert msg["method"] == "session/update"
        assert msg["result"]["stopReason"] == "end_turn"
    stored = json.loads((paths.sessions_dir / sid / "messages.json").read_text())
    assert stored["messages"][0]["content"] == text


async def test_ten_thousand_requests_in_one_burst_are_all_answered(cfg, paths):
    burst = b"".join(
        json.dumps(
            {"jsonrpc": "2.0", "id": i, "method": "authenticate", "params": {"methodId": "none"}}
        ).encode()
        + b"\n"
        for i in range(10_000)
    )
    async with raw_agent(cfg, paths) as peer, anyio.create_task_group() as tg:
        # Like any client, write and read at once: the agent bounds what it holds in flight.
        tg.start_soon(peer.send, burst)
        ids = set()
        for _ in range(10_000):
            resp = await peer.recv(timeout=60)
            assert resp["result"] == {}
            ids.add(resp["id"])
        assert ids == set(range(10_000))
        await _still_serving(peer, msg_id=10_001)


async def test_a_batch_is_answered_as_a_batch(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        await peer.send_json([INIT, {**INIT, "id": 2}])
        resp = await peer.recv()
        assert [(r["id"], r["result"]["protocolVersion"]) for r in resp] == [(1, 1), (2, 1)]


async def test_a_lone_surrogate_in_a_session_id_gets_an_answer_and_the_server_stays_up(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        await peer.send(
            b'{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":'
            b'{"sessionId":"\\ud800","prompt":[{"type":"text","text":"hi"}]}}\n'
        )
        resp = await peer.recv()
        assert resp["id"] == 8 and resp["error"]["code"] == -32002
        await _still_serving(peer)


async def test_a_lone_surrogate_in_a_prompt_is_stored_and_the_session_goes_on(cfg, paths):
    async with raw_agent(cfg, paths) as peer:
        new = await peer.call("session/new", {"cwd": str(paths.cwd), "mcpServers": []})
        sid = new["result"]["sessionId"]
        for n, text in enumerate(["bad \\ud800 text", "fine text"]):
            await peer.send(
                b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"%s",'
                b'"prompt":[{"type":"text","text":"%s"}]}}\n'
                % (10 + n, sid.encode(), text.encode())
            )
            while "result" not in (msg := await peer.recv()):
                assert msg.get("method") == "session/update", msg
            assert msg["result"]["stopReason"] == "end_turn"
    stored = json.loads((paths.sessions_dir / sid / "messages.json").read_text())["messages"]
    assert [m["content"] for m in stored if m["role"] == "user"] == ["bad \ufffd text", "fine text"]


@pytest.mark.parametrize(
    "response",
    [
        {"jsonrpc": "2.0", "id": [1], "result": 1},
        {"jsonrpc": "2.0", "id": {"x": 1}, "error": {"code": "bad", "message": "m"}},
        {"jsonrpc": "2.0", "id": 424242, "result": "nobody asked"},
    ],
    ids=["unhashable-id", "object-id-string-code", "unknown-id"],
)
async def test_a_stray_or_malformed_response_is_ignored(cfg, paths, response):
    async with raw_agent(cfg, paths) as peer:
        await peer.send_json(response)
        await _still_serving(peer, msg_id=12)


async def test_session_new_and_load_without_mcp_servers_take_an_empty_list(cfg, paths):
    # The schema requires mcpServers; scripts written for the reference agent leave it out.
    async with raw_agent(cfg, paths) as peer:
        await peer.call("initialize", {"protocolVersion": 1})
        created = await peer.call("session/new", {"cwd": str(paths.cwd)}, msg_id=2)
        sid = created["result"]["sessionId"]
        await peer.send_json({"jsonrpc": "2.0", "id": 3, "method": "session/load",
                              "params": {"sessionId": sid, "cwd": str(paths.cwd)}})
        while "id" not in (loaded := await peer.recv()):  # past the session's updates
            assert loaded["method"] == "session/update"
    assert loaded["id"] == 3 and "modes" in loaded["result"]
    record = json.loads((paths.sessions_dir / sid / "session.json").read_text())
    assert record["mcpServers"] == []
