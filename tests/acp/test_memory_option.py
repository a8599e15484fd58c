"""The `memory` session config option: a boolean switch, as memory.enable says until the client
switches it, that starts or stops the memory runs of its session's turns, kept as
`memoryEnabled` in session.json, and absent in a child session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import ClientCapabilities
from harness import Editor, in_process_agent, raw_agent

from acp_memory.config import Config
from acp_memory.config.models import MemoryConfig

pytestmark = pytest.mark.anyio


def _config(enable: bool) -> Config:
    cfg = Config()  # the offline model: its memory run takes milliseconds
    cfg.memory = MemoryConfig(enable=enable, wait_seconds=10)
    return cfg


def _memory_option(options: Any) -> Any:
    found = [o for o in options or () if o.id == "memory"]
    return found[0] if found else None


def _record(paths: Any, sid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((paths.sessions_dir / sid / "session.json").read_text())
    return data


def _runs(ed: Editor, sid: str) -> list[str]:
    """The statuses of the memory runs the agent announced for `sid`."""
    return [
        p["status"]
        for m in ed.checker.sent
        if m.get("method") == "_acp_memory/memory_run" and (p := m["params"])["sessionId"] == sid
    ]


async def _open(ed: Editor, cwd: Path) -> Any:
    # Memory runs as the extension notification: the SDK client reads them without a fuss.
    caps = ClientCapabilities(field_meta={"memoryRunUpdates": "ext_notification"})
    await ed.conn.initialize(protocol_version=1, client_capabilities=caps)
    return await ed.conn.new_session(cwd=str(cwd), mcp_servers=[])


async def _turn(ed: Editor, sid: str) -> None:
    resp = await ed.conn.prompt(session_id=sid, prompt=[text_block("hello")])
    assert resp.stop_reason == "end_turn"


@pytest.mark.parametrize("enable", [True, False])
async def test_a_new_session_offers_the_memory_switch_as_memory_enable_says(paths, enable):
    async with in_process_agent(_config(enable), paths) as ed:
        resp = await _open(ed, paths.cwd)
    option = _memory_option(resp.config_options)
    assert option is not None
    assert (option.type, option.name, option.current_value) == (
        "boolean",
        "Long-term memory",
        enable,
    )
    # No choice made yet: the session follows memory.enable, whatever it becomes.
    assert "memoryEnabled" not in _record(paths, resp.session_id)


async def test_switching_memory_off_stops_the_runs_of_that_session_and_on_starts_them(paths):
    async with in_process_agent(_config(True), paths) as ed:
        sid = (await _open(ed, paths.cwd)).session_id
        other = (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])).session_id
        resp = await ed.conn.set_config_option(config_id="memory", session_id=sid, value=False)
        assert _memory_option(resp.config_options).current_value is False
        assert _record(paths, sid)["memoryEnabled"] is False
        await _turn(ed, sid)
        await _turn(ed, other)  # the switch is the session's own: others still run
        assert _runs(ed, sid) == []
        assert _runs(ed, other) == ["started", "finished"]
        resp = await ed.conn.set_config_option(config_id="memory", session_id=sid, value=True)
        assert _memory_option(resp.config_options).current_value is True
        await _turn(ed, sid)
        assert _runs(ed, sid) == ["started", "finished"]
    assert _record(paths, sid)["memoryEnabled"] is True


async def test_switching_memory_on_starts_runs_even_with_memory_enable_false(paths):
    async with in_process_agent(_config(False), paths) as ed:
        sid = (await _open(ed, paths.cwd)).session_id
        await _turn(ed, sid)
        assert _runs(ed, sid) == []
        await ed.conn.set_config_option(config_id="memory", session_id=sid, value=True)
        await _turn(ed, sid)
        assert _runs(ed, sid) == ["started", "finished"]


async def test_the_choice_is_kept_when_the_session_is_loaded_again(paths):
    async with in_process_agent(_config(True), paths) as ed:
        sid = (await _open(ed, paths.cwd)).session_id
        await ed.conn.set_config_option(config_id="memory", session_id=sid, value=False)
    async with in_process_agent(_config(True), paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        loaded = await ed.conn.load_session(cwd=str(paths.cwd), session_id=sid, mcp_servers=[])
        assert _memory_option(loaded.config_options).current_value is False
        await _turn(ed, sid)
        assert _runs(ed, sid) == []


async def test_a_mode_switch_shows_the_memory_switch_in_its_config_option_update(paths):
    async with in_process_agent(_config(True), paths) as ed:
        sid = (await _open(ed, paths.cwd)).session_id
        await ed.conn.set_config_option(config_id="memory", session_id=sid, value=False)
        await ed.conn.set_session_mode(session_id=sid, mode_id="plan")
        await ed.client.wait_for(lambda: "config_option_update" in ed.client.kinds(sid))
    update = next(u for _, u in ed.client.updates if u.session_update == "config_option_update")
    assert _memory_option(update.config_options).current_value is False


async def test_a_memory_value_that_is_not_a_boolean_is_refused(paths):
    async with in_process_agent(_config(True), paths) as ed:
        sid = (await _open(ed, paths.cwd)).session_id
        with pytest.raises(RequestError) as err:
            await ed.conn.set_config_option(config_id="memory", session_id=sid, value="off")
    assert err.value.code == -32602 and "the memory option is true or false" in str(err.value)
    assert "memoryEnabled" not in _record(paths, sid)


async def test_a_child_session_has_no_memory_switch(paths):
    async with in_process_agent(_config(True), paths) as ed:
        sid = (await _open(ed, paths.cwd)).session_id
        await _turn(ed, sid)
        (child,) = (paths.sessions_dir / sid / "subagents").iterdir()
        loaded = await ed.conn.load_session(
            cwd=str(paths.cwd), session_id=child.name, mcp_servers=[]
        )
    assert {o.id for o in loaded.config_options} >= {"mode", "model"}
    assert _memory_option(loaded.config_options) is None
    assert "memoryEnabled" not in json.loads((child / "session.json").read_text())


async def test_a_session_that_never_chose_follows_memory_enable_as_it_is_now(paths):
    async with in_process_agent(_config(True), paths) as ed:
        sid = (await _open(ed, paths.cwd)).session_id
    async with in_process_agent(_config(False), paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        loaded = await ed.conn.load_session(cwd=str(paths.cwd), session_id=sid, mcp_servers=[])
        assert _memory_option(loaded.config_options).current_value is False
        await _turn(ed, sid)
        assert _runs(ed, sid) == []


async def _answer(peer: Any, method: str, params: dict[str, Any], msg_id: int) -> Any:
    """The answer to one request, past the notifications sent meanwhile."""
    await peer.send_json({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    while (msg := await peer.recv()).get("id") != msg_id:
        pass
    return msg


@pytest.mark.parametrize("value", [1, 0, None, 2.5])
async def test_a_memory_value_that_only_looks_like_a_boolean_is_refused_naming_it(paths, value):
    async with raw_agent(_config(True), paths) as peer:
        await _answer(peer, "initialize", {"protocolVersion": 1}, 1)
        opened = await _answer(peer, "session/new", {"cwd": str(paths.cwd), "mcpServers": []}, 2)
        sid = opened["result"]["sessionId"]
        answer = await _answer(peer, "session/set_config_option",
                               {"sessionId": sid, "configId": "memory", "value": value}, 3)
    assert answer["error"]["code"] == -32602
    assert answer["error"]["message"] == (
        f"Invalid params: value: the memory option is true or false, not {value!r}")
    assert "memoryEnabled" not in _record(paths, sid)
