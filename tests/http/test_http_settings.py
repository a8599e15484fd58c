"""/coddy/settings/memory over a real socket: the memory keys read from the config file and
written back in place, validated as the next start would read them, applied to new turns."""

from __future__ import annotations

import os
import stat

import pytest
from httpkit import memory_config, served

from acp_memory.config import Config, load_config

pytestmark = pytest.mark.anyio

URL = "/coddy/settings/memory"
COMMENTED = """\
# my config
providers:
  - {name: offline, type: offline}   # no network
models:
  - model: offline/default
  - model: offline/small   # the memory model
memory:
  enable: true          # on for every turn
  model: "${MEMORY_MODEL}"   # from the environment
  wait_seconds: 20      # the turn's wait
agent: {max_turns: 5}
"""


async def test_without_a_config_file_a_save_creates_one_keeping_memory_on(paths):
    async with served(Config(), paths) as api:
        before = (await api.client.get(URL)).json()
        saved = await api.client.put(URL, json={"values": {"wait_seconds": 7}})
    assert before["object"] == "memory_settings"
    assert before["configFile"] == str(paths.config_file)
    assert before["exists"] is False and before["revision"] == ""
    assert before["values"]["enable"] is True and before["values"]["wait_seconds"] == 20
    assert before["models"] == ["offline/default"]
    assert saved.status_code == 200, saved.text
    assert saved.json()["exists"] is True and saved.json()["values"]["wait_seconds"] == 7
    text = paths.config_file.read_text()
    assert text.endswith("memory:\n  enable: true\n  wait_seconds: 7\n")
    assert text.startswith("# acp-memory configuration")
    cfg = load_config(paths)
    assert cfg.memory.enable is True and cfg.memory.wait_seconds == 7


async def test_a_save_rewrites_only_the_changed_keys_of_the_file(paths, monkeypatch):
    monkeypatch.setenv("MEMORY_MODEL", "offline/small")
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text(COMMENTED)
    async with served(load_config(paths), paths) as api:
        read = (await api.client.get(URL)).json()
        values = dict(read["values"], wait_seconds=3, additional_prompt="Only notes.\nEnglish.\n")
        saved = await api.client.put(URL, json={"values": values, "revision": read["revision"]})
    assert read["values"]["model"] == "${MEMORY_MODEL}"  # as written, never expanded
    assert saved.status_code == 200, saved.text
    assert saved.json()["revision"] not in ("", read["revision"])
    assert paths.config_file.read_text() == COMMENTED.replace(
        "wait_seconds: 20      # the turn's wait",
        "wait_seconds: 3      # the turn's wait\n"
        "  additional_prompt: |\n    Only notes.\n    English.",
    )


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"wait_seconds": -1}, "memory.wait_seconds: Input should be greater than or equal to 0"),
        ({"keep_runs": "many"}, "memory.keep_runs: Input should be a valid integer"),
        ({"enable": "${NOT_SET_ANYWHERE}"}, "memory.enable: Input should be a valid boolean"),
        ({"model": "nobody/nothing"}, "memory.model: 'nobody/nothing' is not a configured model"),
        ({"fallback_models": ["offline/default", "x/y"]}, "memory.fallback_models[1]: 'x/y'"),
        ({"dir": "/elsewhere"}, "request body: values.dir"),
    ],
)
async def test_a_bad_value_is_400_naming_the_key_and_the_file_is_untouched(paths, values, says):
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text(COMMENTED.replace("${MEMORY_MODEL}", "offline/small"))
    async with served(load_config(paths), paths) as api:
        resp = await api.client.put(URL, json={"values": values})
    assert resp.status_code == 400, resp.text
    assert says in resp.json()["error"]["message"]
    assert paths.config_file.read_text() == COMMENTED.replace("${MEMORY_MODEL}", "offline/small")


async def test_a_file_changed_since_it_was_read_is_a_409_and_kept(paths):
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text("memory:\n  wait_seconds: 20\n")
    async with served(Config(), paths) as api:
        read = (await api.client.get(URL)).json()
        paths.config_file.write_text("memory:\n  wait_seconds: 30  # by hand\n")
        resp = await api.client.put(
            URL, json={"values": {"wait_seconds": 5}, "revision": read["revision"]}
        )
    assert resp.status_code == 409
    assert "changed since the settings were read" in resp.json()["error"]["message"]
    assert paths.config_file.read_text() == "memory:\n  wait_seconds: 30  # by hand\n"


async def test_a_saved_change_applies_from_the_next_turn(paths):
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text("memory:\n  enable: true\n")
    async with served(memory_config(), paths) as api:
        sid = await api.new_session()
        assert (await api.prompt(sid, "tea is green")).status_code == 200
        saved = await api.client.put(URL, json={"values": {"enable": False, "keep_runs": 3}})
        assert (await api.prompt(sid, "coffee is black")).status_code == 200
        tasks = (await api.client.get(f"/coddy/sessions/{sid}/background-tasks")).json()["tasks"]
        live = api.runner.cfg.memory
    assert saved.status_code == 200, saved.text
    assert [t["label"] for t in tasks] == ["memory: tea is green"]  # none for the second turn
    assert live.enable is False and live.keep_runs == 3


async def test_a_linked_config_file_stays_a_link_with_its_mode(paths, tmp_path):
    real = tmp_path / "dotfiles" / "acp-memory.yaml"
    real.parent.mkdir()
    real.write_text("memory:\n  enable: true\n")
    os.chmod(real, 0o640)
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.symlink_to(real)
    async with served(Config(), paths) as api:
        resp = await api.client.put(URL, json={"values": {"timeout_seconds": 60}})
    assert resp.status_code == 200, resp.text
    assert paths.config_file.is_symlink()
    assert real.read_text() == "memory:\n  enable: true\n  timeout_seconds: 60\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
