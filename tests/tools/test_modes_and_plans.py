"""Each mode's tool set as the model is offered it, refusals of tools a mode lacks, and plan
mode's one writer, which writes plan files inside the session bundle and nowhere else."""

from __future__ import annotations

import pytest
from fakes.script import call, tool_calls
from filetools_kit import diffs, finished_calls, open_session, prompt, scripted_agent, tool_results

from acp_memory.tools.plan import plan_slug

pytestmark = pytest.mark.anyio


def offered(request) -> list[str]:
    return sorted(t["function"]["name"] for t in request.json["tools"])


async def test_each_mode_is_offered_its_own_tools(paths):
    async with scripted_agent(paths) as (server, ed, _):
        sid = await open_session(ed, paths)
        for mode in ("agent", "plan", "ask"):
            await ed.conn.set_session_mode(session_id=sid, mode_id=mode)
            await prompt(ed, sid, f"in {mode}")
    agent, plan, ask = (offered(r) for r in server.requests)
    assert {"read_file", "list_directory", "glob", "grep", "write_file", "edit_file"} <= set(agent)
    assert "write_plan" not in agent
    # The background tools join plan mode when they are registered; none of the writers do.
    assert {"read_file", "list_directory", "glob", "grep", "write_plan"} <= set(plan)
    assert not {"write_file", "edit_file"} & set(plan)
    assert "update_plan" in agent and "update_plan" in plan  # the editor's checklist
    assert set(plan) <= {
        *ask,
        "write_plan",
        "update_plan",
        "background_list",
        "background_output",
        "background_wait",
    }
    assert ask == ["glob", "grep", "list_directory", "read_file"]


@pytest.mark.parametrize("mode", ["plan", "ask"])
async def test_a_write_in_a_read_only_mode_is_refused_and_nothing_is_written(paths, mode):
    reply = tool_calls(call("write_file", {"path": "a.txt", "content": "x"}))
    async with scripted_agent(paths, reply) as (server, ed, _):
        sid = await open_session(ed, paths)
        await ed.conn.set_session_mode(session_id=sid, mode_id=mode)
        assert await prompt(ed, sid, "Write.") == "end_turn"
    [result] = tool_results(server)
    assert f"no tool named 'write_file' in {mode} mode" in result
    assert not (paths.cwd / "a.txt").exists()


async def test_write_plan_writes_a_plan_file_in_the_bundle_only(paths):
    before = sorted(p.name for p in paths.cwd.iterdir())
    plan = "# Steps\n1. Read.\n2. Change.\n"
    reply = tool_calls(call("write_plan", {"title": "Refactor the parser!", "content": plan}))
    async with scripted_agent(paths, reply, permission_mode="ask") as (server, ed, _):
        sid = await open_session(ed, paths)
        await ed.conn.set_session_mode(session_id=sid, mode_id="plan")
        assert await prompt(ed, sid, "Plan it.") == "end_turn"
        [update] = finished_calls(ed, sid)
    target = paths.sessions_dir / sid / "plans" / "refactor-the-parser.plan.md"
    assert target.read_text() == plan
    assert sorted(p.name for p in paths.cwd.iterdir()) == before
    assert ed.client.permission_requests == []  # a plan in the bundle needs no permission
    assert tool_results(server) == [f"Saved the plan to {target}."]
    [diff] = diffs(update)
    assert (diff.path, diff.old_text, diff.new_text) == (str(target), None, plan)


async def test_write_plan_is_not_offered_in_agent_mode(paths):
    reply = tool_calls(call("write_plan", {"title": "x", "content": "y"}))
    async with scripted_agent(paths, reply) as (server, ed, _):
        sid = await open_session(ed, paths)
        await prompt(ed, sid, "Plan.")
    assert "no tool named 'write_plan' in agent mode" in tool_results(server)[0]


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("../../etc/passwd", "etc-passwd"),
        ("/abs/path.md", "abs-path-md"),
        ("План миграции", "план-миграции"),
        ("...", "plan"),
        ("a" * 100, "a" * 60),
    ],
)
def test_a_plan_slug_never_leaves_the_plans_folder(title, slug):
    assert plan_slug(title) == slug
