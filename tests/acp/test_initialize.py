from __future__ import annotations

import socket

import anyio
import pytest
from acp import RequestError
from harness import RawPeer, in_process_agent, subprocess_agent

from acp_memory import __version__
from acp_memory.acp.server import serve_unconfigured
from acp_memory.jsonrpc.fdstream import FdReceiveStream, FdSendStream

pytestmark = pytest.mark.anyio


async def test_initialize_advertises_protocol_1_and_what_the_agent_supports(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        resp = await ed.conn.initialize(protocol_version=1)
    caps = resp.agent_capabilities
    assert resp.protocol_version == 1
    assert caps.load_session is True
    assert caps.prompt_capabilities.image is True  # to a model configured with vision
    assert caps.prompt_capabilities.audio is False
    assert caps.prompt_capabilities.embedded_context is True
    assert caps.session_capabilities.list is not None
    assert resp.auth_methods == []
    assert (resp.agent_info.name, resp.agent_info.version) == ("acp-memory", __version__)
    assert resp.agent_info.title


@pytest.mark.parametrize(("asked", "answered"), [(1, 1), (7, 1), (0, 0)])
async def test_protocol_version_is_negotiated_down_to_what_both_speak(cfg, paths, asked, answered):
    async with in_process_agent(cfg, paths) as ed:
        resp = await ed.conn.initialize(protocol_version=asked)
    assert resp.protocol_version == answered


async def test_authenticate_answers_empty(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.authenticate(method_id="anything")
    reply = [m for m in ed.checker.sent if m.get("id") == 1 and "result" in m]
    assert reply and reply[-1]["result"] == {}


async def test_an_unconfigured_agent_stops_on_a_stop_signal_with_its_input_still_open():
    # A config that failed to load takes SIGTERM's handler too: the stop must end it, or the
    # editor's SIGTERM would do nothing at all.
    agent_sock, client_sock = socket.socketpair()
    receive, send = FdReceiveStream(agent_sock.fileno()), FdSendStream(agent_sock.fileno())
    stop = anyio.Event()
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve_unconfigured, receive, send, "bad config", stop)
                answer = await RawPeer(client_sock).call("initialize", {"protocolVersion": 1})
                assert answer["result"]["protocolVersion"] == 1
                stop.set()
    finally:
        await receive.aclose()
        await send.aclose()
        agent_sock.close()
        client_sock.close()


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ("x: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 50 levels (line 1)"),
        ("a: &a 1\nb: [" + ", ".join(["*a"] * 101) + "]\n", "more than 100 YAML aliases"),
    ],
    ids=["deep", "aliases"],
)
async def test_a_config_past_its_bounds_answers_initialize_then_refuses_sessions_with_one_line(
    tmp_path, config, says
):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(config)
    async with subprocess_agent(home) as ed:
        init = await ed.conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as err:
            await ed.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
    assert init.protocol_version == 1
    line = f"{home / 'config.yaml'}: {says}"
    message = err.value.args[0]
    assert message.startswith(line)
    assert ed.process is not None
    assert ed.process.returncode == 2  # once the input closed, as for any config error
    (said,) = ed.stderr.decode().splitlines()
    assert said == f"acp-memory: {message}"  # the editor reads the line stderr says
