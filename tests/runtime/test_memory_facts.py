"""Facts checked against the code, through a real memory run on the offline model: a fact from
a note citing a path gone from the workspace, or from an old note, is reported as possibly
stale and why; the notes the run read get a read stamp under the home."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from engine.turnkit import prompt, turn_agent
from runtime.test_memory_run import memory_updates, task_log

from acp_memory.config import Config, Paths
from acp_memory.config.models import MemoryConfig
from acp_memory.memory.history.journal import Journal
from acp_memory.runtime.subagents import REPORT_HEADER

pytestmark = pytest.mark.anyio


async def test_the_offline_child_reports_flagged_and_old_facts_as_possibly_stale(paths: Paths):
    (paths.cwd / "scripts").mkdir()
    (paths.cwd / "scripts" / "check.sh").write_text("true\n")
    project = paths.cwd / "memory"
    project.mkdir()
    (project / "deploy.md").write_text("We deploy with `scripts/release.sh`.\n")
    (project / "deploy-checks.md").write_text("Deploys first run `scripts/check.sh`.\n")
    old = paths.home / "memory" / "deploy-days.md"
    old.parent.mkdir(parents=True)
    old.write_text("Deploy days are Tuesdays.\n")
    when = (datetime.now(UTC) - timedelta(days=200)).timestamp()
    os.utime(old, (when, when))
    cfg = Config()
    cfg.memory = MemoryConfig(enable=True, wait_seconds=30)
    async with turn_agent(cfg, paths) as (ed, _):
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, "How do we deploy?") == "end_turn"
        assert memory_updates(ed)[-1]["status"] == "finished"
    report = task_log(paths, sid, "bg_1").split(f"{REPORT_HEADER}\n", 1)[1]
    facts = [line for line in report.splitlines() if line.startswith("- ")]
    assert ("- possibly stale: We deploy with `scripts/release.sh`. (cites scripts/release.sh: "
            "not in the workspace)") in facts
    (days,) = [f for f in facts if "Tuesdays" in f]
    assert days.startswith("- possibly stale: Deploy days are Tuesdays. (changed ")
    assert days.endswith(", 6 months ago)")
    # A fact from a fresh note whose cited path exists is plain.
    assert "- Deploys first run `scripts/check.sh`." in facts
    # Every note the run read is stamped under the home; nothing is written into the notes.
    journal = Journal(paths.history_dir / "journal.sqlite3")
    try:
        assert set(journal.reads(project.absolute())) == {"deploy.md", "deploy-checks.md"}
        assert set(journal.reads((paths.home / "memory").absolute())) == {"deploy-days.md"}
    finally:
        journal.close()
    assert (project / "deploy.md").read_text() == "We deploy with `scripts/release.sh`.\n"
    assert old.stat().st_mtime == when


async def test_a_runs_cost_and_read_stamps_are_journaled_in_one_unsynced_transaction(
    paths: Paths,
):
    """At the run's seal: its cost is in its record (synced), so the journal's copy rides
    the read stamps' transaction, one lock and one commit, without a sync of its own."""
    project = paths.cwd / "memory"
    project.mkdir()
    (project / "deploy.md").write_text("We deploy with `scripts/release.sh`.\n")
    cfg = Config()
    cfg.memory = MemoryConfig(enable=True, wait_seconds=30)
    statements: list[str] = []
    async with turn_agent(cfg, paths) as (ed, agent):
        with agent.runner.memory.journal().use() as db:
            db.set_trace_callback(statements.append)
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, "How do we deploy?") == "end_turn"
        assert memory_updates(ed)[-1]["status"] == "finished"
    writes = [s for s in statements if not s.startswith("SELECT")]
    assert writes.count("COMMIT") == 1, writes
    begin, commit = writes.index("BEGIN IMMEDIATE"), writes.index("COMMIT")
    assert writes[begin - 1] == "PRAGMA synchronous=NORMAL", writes
    done = writes[begin + 1:commit]
    assert [s.split(" VALUES")[0] for s in done] == [
        "INSERT INTO reads(root, path, time)", "INSERT OR REPLACE INTO runs"], writes
    journal = Journal(paths.history_dir / "journal.sqlite3")
    try:
        assert set(journal.reads(project.absolute())) == {"deploy.md"}
        assert [day["runs"] for day in journal.costs_per_day()] == [1]
    finally:
        journal.close()
