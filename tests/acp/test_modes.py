from __future__ import annotations

import json
import logging

import pytest
from acp import RequestError
from harness import in_process_agent

from acp_memory.acp.server import build_agent
from acp_memory.config import load_config
from acp_memory.config.models import Config, ModelConfig, ProviderConfig
from acp_memory.llm.registry import ProviderHub

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


LOCAL = ProviderConfig(name="local", type="openai", api_base="http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("models", "listed"),
    [
        ([], ["offline/default"]),
        (["local/small", "local/big"], ["local/small", "local/big"]),
        (["local/small", "offline/default"], ["local/small", "offline/default"]),
    ],
)
async def test_the_model_selector_lists_exactly_the_configured_models(paths, models, listed):
    cfg = Config(providers=[LOCAL], models=[ModelConfig(model=m) for m in models])
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        resp = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
    model = _option(resp.config_options, "model")
    assert [o.value for o in model.options] == listed
    assert model.current_value == listed[0]


async def test_the_offline_model_is_not_selectable_beside_configured_ones(paths):
    cfg = Config(providers=[LOCAL], models=[ModelConfig(model="local/small")])
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        with pytest.raises(RequestError) as err:
            await ed.conn.set_config_option(
                config_id="model", session_id=sid, value="offline/default"
            )
    assert err.value.code == -32602 and "choose one of local/small" in str(err.value)


async def test_a_session_whose_saved_model_is_no_longer_listed_goes_on_with_the_default(paths):
    old = Config()  # the session was made when only the offline model was there
    async with in_process_agent(old, paths) as ed:
        sid = await ed.start_session(paths.cwd)
    cfg = Config(providers=[LOCAL], models=[ModelConfig(model="local/small")])
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        resp = await ed.conn.load_session(cwd=str(paths.cwd), session_id=sid, mcp_servers=[])
        model = _option(resp.config_options, "model")
        assert (model.current_value, [o.value for o in model.options]) == (
            "local/small",
            ["local/small"],
        )
        # Switching the mode saves the record: the default model goes to disk with it.
        await ed.conn.set_config_option(config_id="mode", session_id=sid, value="ask")
    record = json.loads((paths.sessions_dir / sid / "session.json").read_text())
    assert record["selectedModelId"] == "local/small"


async def test_a_session_id_flag_opening_a_session_whose_model_is_unlisted_shows_the_default(
    paths,
):
    async with in_process_agent(Config(), paths) as ed:
        sid = await ed.start_session(paths.cwd)  # on the offline model
    cfg = Config(providers=[LOCAL], models=[ModelConfig(model="local/small")])
    agent = build_agent(cfg, paths, ProviderHub(cfg), first_session_id=sid)
    async with in_process_agent(cfg, paths, agent) as ed:
        await ed.conn.initialize(protocol_version=1)
        resp = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
    model = _option(resp.config_options, "model")
    assert (resp.session_id, model.current_value) == (sid, "local/small")


async def test_with_no_config_file_the_first_session_says_which_model_it_runs_on(
    paths, monkeypatch, caplog
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = load_config(paths)  # the home has no config.yaml
    caplog.set_level(logging.WARNING)
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        first = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
        await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
    model = _option(first.config_options, "model")
    assert (model.current_value, [o.value for o in model.options]) == (
        "openai/gpt-4.1-mini",
        ["openai/gpt-4.1-mini"],
    )
    said = [r.getMessage() for r in caplog.records if "sessions run on" in r.getMessage()]
    assert said == [
        f"no config file at {paths.config_file}: sessions run on openai/gpt-4.1-mini "
        "(OPENAI_API_KEY is set)"
    ]
