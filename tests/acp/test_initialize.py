from __future__ import annotations

import pytest
from harness import in_process_agent

from acp_memory import __version__

pytestmark = pytest.mark.anyio


async def test_initialize_advertises_protocol_1_and_what_the_agent_supports(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        resp = await ed.conn.initialize(protocol_version=1)
    caps = resp.agent_capabilities
    assert resp.protocol_version == 1
    assert caps.load_session is True
    assert caps.prompt_capabilities.image is False
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
