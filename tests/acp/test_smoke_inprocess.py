from __future__ import annotations

import pytest
from acp import text_block
from harness import in_process_agent

pytestmark = pytest.mark.anyio


async def test_prompt_streams_offline_reply(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        resp = await ed.conn.prompt(session_id=sid, prompt=[text_block("hello there")])
        assert resp.stop_reason == "end_turn"
        assert "offline model" in ed.client.text(sid)
