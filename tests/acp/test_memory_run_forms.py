"""A client chooses at initialize how memory_run updates reach it
(`clientCapabilities._meta.memoryRunUpdates`), over `acp.memory_run_updates`; an unquoted `off`
in config.yaml is `off`."""

from __future__ import annotations

from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import ClientCapabilities
from harness import Editor, in_process_agent

from acp_memory.config import Config, load_config
from acp_memory.config.models import AcpConfig, MemoryConfig

pytestmark = pytest.mark.anyio


def _memory_on(form: str = "session_update") -> Config:
    cfg = Config()  # the offline model: its memory run takes milliseconds
    cfg.memory = MemoryConfig(enable=True, wait_seconds=10)
    cfg.acp = AcpConfig(memory_run_updates=form)  # type: ignore[arg-type]
    return cfg


def _forms_sent(ed: Editor) -> list[tuple[str, str]]:
    """(form, status) of every memory_run the agent sent, in order."""
    out = []
    for msg in ed.checker.sent:
        params = msg.get("params") or {}
        if msg.get("method") == "_acp_memory/memory_run":
            out.append(("ext_notification", params["status"]))
        elif msg.get("method") == "session/update":
            if params["update"].get("sessionUpdate") == "memory_run":
                out.append(("session_update", params["update"]["status"]))
    return out


async def _one_turn(ed: Editor, cwd: Any, capabilities: ClientCapabilities | None) -> str:
    await ed.conn.initialize(protocol_version=1, client_capabilities=capabilities)
    sid = (await ed.conn.new_session(cwd=str(cwd), mcp_servers=[])).session_id
    resp = await ed.conn.prompt(session_id=sid, prompt=[text_block("hello")])
    assert resp.stop_reason == "end_turn"
    return sid


def _asking(value: Any) -> ClientCapabilities:
    return ClientCapabilities(field_meta={"memoryRunUpdates": value})


@pytest.mark.parametrize(
    ("configured", "asked", "sent"),
    [
        ("ext_notification", "session_update", "session_update"),
        ("session_update", "ext_notification", "ext_notification"),
        ("session_update", "off", None),
        ("ext_notification", False, None),
        ("off", "ext_notification", "ext_notification"),
    ],
)
async def test_the_form_asked_at_initialize_wins_over_the_config(paths, configured, asked, sent):
    async with in_process_agent(_memory_on(configured), paths) as ed:
        sid = await _one_turn(ed, paths.cwd, _asking(asked))
        forms = _forms_sent(ed)
        ext = ed.client.ext
    assert forms == ([] if sent is None else [(sent, "started"), (sent, "finished")])
    if sent == "ext_notification":
        # The SDK hands it to ext_notification, the leading underscore taken off.
        assert [(m, p["sessionId"]) for m, p in ext] == [("acp_memory/memory_run", sid)] * 2


@pytest.mark.parametrize("configured", ["session_update", "ext_notification"])
async def test_a_client_that_asks_nothing_gets_the_configured_form(paths, configured):
    async with in_process_agent(_memory_on(configured), paths) as ed:
        await _one_turn(ed, paths.cwd, None)
        assert _forms_sent(ed) == [(configured, "started"), (configured, "finished")]


async def test_a_form_that_is_no_form_is_refused_naming_the_field(paths):
    async with in_process_agent(_memory_on(), paths) as ed:
        with pytest.raises(RequestError) as err:
            await ed.conn.initialize(protocol_version=1, client_capabilities=_asking("loud"))
    assert err.value.code == -32602
    assert "clientCapabilities._meta.memoryRunUpdates: 'loud'" in str(err.value)


async def test_an_unquoted_off_in_config_yaml_sends_no_memory_run(paths):
    paths.home.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text("memory: {enable: true}\nacp: {memory_run_updates: off}\n")
    cfg = load_config(paths, explicit=True)
    async with in_process_agent(cfg, paths) as ed:
        sid = await _one_turn(ed, paths.cwd, None)
        assert _forms_sent(ed) == []
    # The run happened all the same: only its updates were left out.
    assert list((paths.sessions_dir / sid / "subagents").iterdir())
