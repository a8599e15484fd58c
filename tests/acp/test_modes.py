from __future__ import annotations

import json

import pytest
from acp import RequestError
from harness import in_process_agent

from acp_memory.config.models import Config, ModelConfig, ProviderConfig

pytestmark = pytest.mark.anyio


def _option(options, option_id):
    return next(o for o in options if o.id == option_id)


async def test_new_session_offers_three_modes_and_two_config_options(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        resp = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
    assert resp.modes.current_mode_id == "agent"
    assert [m.id for m in resp.modes.available_modes] == ["agent", "plan", "ask"]
    mode = _option(resp.config_options, "mode")
    model = _option(resp.config_options, "model")
    assert (mode.category, mode.current_value) == ("mode", "agent")
    assert (model.category, model.current_value) == ("model", "offline/default")


async def test_set_mode_switches_reports_and_persists(cfg, paths):
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        await ed.conn.set_session_mode(session_id=sid, mode_id="plan")
        await ed.client.wait_for(lambda: "current_mode_update" in ed.client.kinds(sid))
        with pytest.raises(RequestError) as err:
            await ed.conn.set_session_mode(session_id=sid, mode_id="yolo")
    update = next(u for _, u in ed.client.updates if u.session_update == "current_mode_update")
    assert update.current_mode_id == "plan"
    options = next(u for _, u in ed.client.updates if u.session_update == "config_option_update")
    assert _option(options.config_options, "mode").current_value == "plan"
    assert err.value.code == -32602 and "yolo" in str(err.value)
    record = json.loads((paths.sessions_dir / sid / "session.json").read_text())
    assert record["mode"] == "plan"


async def test_config_options_switch_mode_and_model(paths):
    cfg = Config(
        providers=[ProviderConfig(name="local", type="openai", api_base="http://127.0.0.1:9")],
        models=[ModelConfig(model="local/small"), ModelConfig(model="offline/default")],
    )
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        resp = await ed.conn.set_config_option(config_id="mode", session_id=sid, value="ask")
        assert _option(resp.config_options, "mode").current_value == "ask"
        await ed.client.wait_for(lambda: "current_mode_update" in ed.client.kinds(sid))
        resp = await ed.conn.set_config_option(
            config_id="model", session_id=sid, value="offline/default"
        )
        model = _option(resp.config_options, "model")
        assert model.current_value == "offline/default"
        assert [o.value for o in model.options] == ["local/small", "offline/default"]
        with pytest.raises(RequestError) as err:
            await ed.conn.set_config_option(config_id="model", session_id=sid, value="nope/x")
        assert err.value.code == -32602
        with pytest.raises(RequestError):
            await ed.conn.set_config_option(config_id="color", session_id=sid, value="red")
    record = json.loads((paths.sessions_dir / sid / "session.json").read_text())
    assert (record["mode"], record["selectedModelId"]) == ("ask", "offline/default")
