"""The proxy's relay in process: the editor and the inner agent are byte streams in memory,
the test plays both."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from jsonrpc.memory_wire import Peer

from acp_memory.proxy.relay import Forward, Passthrough, Relay, Reply, Side

pytestmark = pytest.mark.anyio


EXIT_LINE = "the inner agent fake exited with code 3: boom"


def make_relay(policy: Any = None) -> tuple[Peer, Peer, Relay]:
    """A relay between an editor and an agent the test plays (editor, agent, relay)."""
    editor, agent = Peer(), Peer()

    async def agent_exit() -> str:
        return EXIT_LINE

    relay = Relay(
        (editor.receive_stream, editor.send_stream),
        (agent.receive_stream, agent.send_stream),
        policy or Passthrough(),
        agent_exit=agent_exit,
    )
    return editor, agent, relay


@contextlib.asynccontextmanager
async def relayed(policy: Any = None) -> AsyncIterator[tuple[Peer, Peer, Relay]]:
    """make_relay's, running until the block ends."""
    editor, agent, relay = make_relay(policy)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(relay.run)
            yield editor, agent, relay
            tg.cancel_scope.cancel()


def request(msg_id: Any, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


def result(msg_id: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "result": value}


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


async def test_each_sides_requests_get_fresh_ids_on_the_other_and_their_own_on_the_answer():
    async with relayed() as (editor, agent, _):
        await editor.send_json(request("e-1", "session/new", {"cwd": "/p", "mcpServers": []}))
        got = await agent.recv()
        assert got == request(1, "session/new", {"cwd": "/p", "mcpServers": []})
        # The agent numbers its own requests as it likes, the same numbers included.
        await agent.send_json(request(1, "fs/read_text_file", {"sessionId": "s", "path": "/a"}))
        asked = await editor.recv()
        assert asked == request(1, "fs/read_text_file", {"sessionId": "s", "path": "/a"})
        await editor.send_json(request(7, "_x/ping", None) | {"params": {}})
        assert await agent.recv() == request(2, "_x/ping", {})

        await agent.send_json(result(2, "pong"), result(1, {"sessionId": "s"}))
        await editor.send_json(result(1, {"content": "text"}))
        assert await agent.recv() == result(1, {"content": "text"})
        answers = [await editor.recv(), await editor.recv()]
        assert sorted(answers, key=str) == sorted(
            [result(7, "pong"), result("e-1", {"sessionId": "s"})], key=str
        )


async def test_cancel_request_names_the_forwarded_id_and_an_unknown_id_passes_as_it_is():
    async with relayed() as (editor, agent, _):
        await editor.send_json(request(5, "session/prompt", {"sessionId": "s", "prompt": []}))
        assert (await agent.recv())["id"] == 1
        await editor.send_json(notification("$/cancel_request", {"requestId": 5}))
        assert await agent.recv() == notification("$/cancel_request", {"requestId": 1})
        await editor.send_json(notification("$/cancel_request", {"requestId": 99}))
        assert await agent.recv() == notification("$/cancel_request", {"requestId": 99})

        # And the other way: the agent cancels its own question to the editor.
        await agent.send_json(request("q", "session/request_permission", {"sessionId": "s"}))
        assert (await editor.recv())["id"] == 1
        await agent.send_json(notification("$/cancel_request", {"requestId": "q"}))
        assert await editor.recv() == notification("$/cancel_request", {"requestId": 1})

        cancelled = {"code": -32800, "message": "Request cancelled"}
        await agent.send_json({"jsonrpc": "2.0", "id": 1, "error": cancelled})
        assert await editor.recv() == {"jsonrpc": "2.0", "id": 5, "error": cancelled}


class Holding(Passthrough):
    """Holds an editor request whose params say `hold` without forwarding it (a memory wait
    that never ends); forwards the others."""

    async def editor_request(self, method: str, params: Any, forward: Forward) -> Reply:
        if params.get("hold"):
            await anyio.sleep_forever()
        return await forward(params)


async def test_cancel_request_for_a_request_the_policy_still_holds_ends_it_there():
    async with relayed(Holding()) as (editor, agent, relay):
        await editor.send_json(request(5, "session/prompt", {"sessionId": "s", "hold": True}))
        await editor.send_json(notification("$/cancel_request", {"requestId": 5}))
        answer = await editor.recv()
        assert answer == {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": -32800, "message": "Request cancelled"},
        }
        # Nothing of it reached the agent: the next thing it reads is this notification.
        await relay.notify(Side.AGENT, "_x/marker", {})
        assert await agent.recv() == notification("_x/marker", {})


async def test_the_agents_updates_reach_the_editor_before_the_answer_of_their_prompt():
    async with relayed() as (editor, agent, _):
        await editor.send_json(request(3, "session/prompt", {"sessionId": "s", "prompt": []}))
        assert (await agent.recv())["id"] == 1
        updates = [
            notification("session/update", {"sessionId": "s", "update": {"n": n}})
            for n in range(50)
        ]
        await agent.send_json(*updates, result(1, {"stopReason": "end_turn"}))
        seen = [await editor.recv() for _ in range(51)]
        assert seen == [*updates, result(3, {"stopReason": "end_turn"})]


async def test_a_line_that_is_not_json_rpc_is_dropped_and_logged(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="acp_memory.proxy.relay")
    async with relayed() as (editor, agent, _):
        await editor.send(b"not json\n")
        await editor.send_json({"id": 1, "method": "session/new"})  # no "jsonrpc"
        await editor.send_json(request([1], "session/new", {}))  # an id that cannot be kept
        await editor.send_json(result(42, "an answer to nothing"))
        await editor.send_json(request(2, "session/new", {"cwd": "/p"}))
        assert await agent.recv() == request(1, "session/new", {"cwd": "/p"})

        await agent.send(b'{"jsonrpc": "2.0", "method": \n')
        await agent.send_json(notification("session/update", {"n": 1}))
        assert await editor.recv() == notification("session/update", {"n": 1})
    dropped = [r.getMessage() for r in caplog.records if "dropped a line" in r.getMessage()]
    assert len(dropped) == 5, dropped
    assert all(line.startswith("dropped a line from the editor") for line in dropped[:4])
    assert dropped[4].startswith("dropped a line from the agent: not JSON")


async def test_an_error_answer_passes_with_its_code_message_and_data():
    error = {"code": -32002, "message": "Resource not found", "data": {"uri": "file:///a"}}
    async with relayed() as (editor, agent, _):
        await editor.send_json(request(9, "session/load", {"sessionId": "gone"}))
        assert (await agent.recv())["id"] == 1
        await agent.send_json({"jsonrpc": "2.0", "id": 1, "error": error})
        assert await editor.recv() == {"jsonrpc": "2.0", "id": 9, "error": error}


async def test_our_own_requests_never_share_an_id_with_forwarded_ones():
    async with relayed() as (editor, agent, relay):
        await editor.send_json(request(1, "session/prompt", {"sessionId": "s"}))
        assert (await agent.recv())["id"] == 1
        ours: list[Reply] = []

        async def ask() -> None:
            ours.append(await relay.request(Side.AGENT, "_acp_memory/ours", {"n": 1}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            assert await agent.recv() == request(2, "_acp_memory/ours", {"n": 1})
            await editor.send_json(request(2, "session/prompt", {"sessionId": "t"}))
            assert (await agent.recv())["id"] == 3
            await agent.send_json(result(2, "ours"), result(3, "second"), result(1, "first"))
        assert ours == [Reply(result="ours")]
        answers = [await editor.recv(), await editor.recv()]
        assert result(1, "first") in answers and result(2, "second") in answers


async def test_the_agents_end_answers_every_request_pending_at_it_with_its_exit_line():
    editor, agent, relay = make_relay(Holding())
    answers: list[Any] = []

    async def play() -> None:
        await editor.send_json(request(1, "session/prompt", {"sessionId": "s"}))
        await editor.send_json(request("two", "session/prompt", {"sessionId": "t"}))
        assert (await agent.recv())["id"] == 1
        assert (await agent.recv())["id"] == 2
        # One the policy still holds gets the same answer, without waiting for its wait.
        await editor.send_json(request("held", "session/prompt", {"hold": True}))
        await agent.end()
        answers.extend([await editor.recv() for _ in range(3)])

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(play)
            await relay.run()  # ends by itself, the editor's input still open
    error = {"code": -32603, "message": EXIT_LINE}
    assert sorted(answers, key=str) == sorted(
        [
            {"jsonrpc": "2.0", "id": 1, "error": error},
            {"jsonrpc": "2.0", "id": "two", "error": error},
            {"jsonrpc": "2.0", "id": "held", "error": error},
        ],
        key=str,
    )
    assert relay.ended_by is Side.AGENT
