"""/coddy/sessions/{id}/background-tasks over a real socket: memory runs are listed as system
tasks, read with their log tail, and the person may stop one."""

from __future__ import annotations

import json

import anyio
import pytest
from httpkit import BOUND_S, HeldProvider, memory_config, served, use_model

pytestmark = pytest.mark.anyio


async def test_a_running_memory_run_is_listed_read_and_stopped_by_the_person(paths):
    held = HeldProvider()
    async with served(memory_config(wait_seconds=0), paths) as api:
        use_model(api, held, child=True)
        sid = await api.new_session()
        assert (await api.prompt(sid, "What do I like?")).json()["stopReason"] == "end_turn"
        with anyio.fail_after(BOUND_S):
            await held.started.wait()
        url = f"/coddy/sessions/{sid}/background-tasks"
        listing = (await api.client.get(url)).json()
        detail = (await api.client.get(f"{url}/bg_1", params={"tail": 5})).json()
        stopped = (await api.client.post(f"{url}/bg_1/stop")).json()
        after = (await api.client.get(url)).json()
    assert listing["object"] == "background_task_list"
    (task,) = listing["tasks"]
    assert task["id"] == "bg_1" and task["status"] == "running"
    assert task["system"] is True and task["kind"] == "agent"
    assert task["agent"]["name"] == "memory" and task["agent"]["system"] is True
    assert task["label"] == "memory: What do I like?"
    assert detail["object"] == "background_task" and detail["task"]["id"] == "bg_1"
    assert detail["tail"].startswith("task: ")
    assert stopped["task"]["status"] == "stopped"
    assert stopped["task"]["error"] == "stopped by the user (HTTP API)"
    assert held.cancelled.is_set()
    assert after["tasks"][0]["status"] == "stopped"
    meta = (paths.sessions_dir / sid / "background" / "bg_1" / "meta.json").read_text()
    assert '"status": "stopped"' in meta


async def test_a_finished_task_is_read_with_its_log_and_a_stop_leaves_it_as_it_is(paths):
    async with served(memory_config(), paths) as api:
        sid = await api.new_session()
        assert (await api.prompt(sid, "remember that tea is green")).status_code == 200
        url = f"/coddy/sessions/{sid}/background-tasks/bg_1"
        detail = (await api.client.get(url)).json()
        quiet = (await api.client.get(url, params={"tail": 0})).json()
        stopped = (await api.client.post(f"{url}/stop")).json()
        (listed,) = (await api.client.get(url.rpartition("/")[0])).json()["tasks"]
    assert detail["task"]["status"] == "succeeded"
    # What the run cost, as its record keeps it (the Tasks drawer shows it).
    meta = json.loads((paths.sessions_dir / sid / "background" / "bg_1" / "meta.json").read_text())
    assert detail["task"]["cost"] == listed["cost"] == meta["cost"]
    assert meta["cost"]["model_calls"] >= 1 and meta["cost"]["input_tokens"] > 0
    assert "=== subagent report ===" in detail["tail"]
    assert "tail" not in quiet
    assert stopped["task"]["status"] == "succeeded"


async def test_an_unknown_task_is_404_and_a_bad_tail_is_400(paths):
    async with served(memory_config(), paths) as api:
        sid = await api.new_session()
        url = f"/coddy/sessions/{sid}/background-tasks"
        missing = await api.client.get(f"{url}/bg_9")
        stop_missing = await api.client.post(f"{url}/bg_9/stop")
        not_an_id = await api.client.get(f"{url}/nonsense")
        bad_tail = await api.client.get(f"{url}/bg_1", params={"tail": -1})
        listing = (await api.client.get(url)).json()
    assert missing.status_code == stop_missing.status_code == not_an_id.status_code == 404
    assert "bg_9" in missing.json()["error"]["message"]
    assert bad_tail.status_code == 400 and "tail" in bad_tail.json()["error"]["message"]
    assert listing["tasks"] == []


async def test_a_memory_run_stopped_by_its_sessions_delete_brings_no_pool_back(paths):
    held = HeldProvider()
    async with served(memory_config(wait_seconds=0, keep_runs=1), paths) as api:
        use_model(api, held, child=True)
        sid = await api.new_session()
        assert (await api.prompt(sid, "What do I like?")).json()["stopReason"] == "end_turn"
        with anyio.fail_after(BOUND_S):
            await held.started.wait()
        assert api.runner.memory.bounds.in_flight(sid) == 1
        assert (await api.client.delete(f"/coddy/sessions/{sid}")).status_code == 200
        # The stopped run's bookkeeping (its delivery line, then retention) runs after the
        # delete: each step is spawned before the one before it ends.
        with anyio.fail_after(BOUND_S):
            await api.runner.memory.settled()
        assert sid not in api.runner._pools
    assert not (paths.sessions_dir / sid).exists()
