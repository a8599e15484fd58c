"""/memory log, undo, pending, approve and reject through the real agent (ACP in process; every
surface runs commands through the runner): the notes' history as this session sees it, the
last memory run undone in one step, and this session's held changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from engine.turnkit import prompt, turn_agent, updates_of

from acp_memory.config import Config, Paths
from acp_memory.config.models import MemoryConfig
from acp_memory.memory.history.journal import Journal
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.history.states import Captured
from acp_memory.memory.store import MemoryStore

pytestmark = pytest.mark.anyio

FACT = "I drink green tea every morning"
NOTE = "i-drink-green-tea-every-morning.md"


def offline_memory() -> Config:
    cfg = Config()
    cfg.memory = MemoryConfig(enable=True, wait_seconds=30)
    return cfg


async def reply(ed: Any, sid: str, text: str) -> str:
    ed.client.updates.clear()
    assert await prompt(ed, sid, text) == "end_turn"
    return "".join(u.content.text for u in updates_of(ed, sid, "agent_message_chunk"))


def cli_store(paths: Paths) -> MemoryStore:
    """The notes as `acp-memory notes` changes them, beside the agent."""
    return MemoryStore.from_config(Config(), paths)


async def test_memory_log_lists_the_changes_with_the_run_that_made_them(paths: Paths) -> None:
    async with turn_agent(offline_memory(), paths) as (ed, _):
        sid = await ed.start_session(paths.cwd)
        empty = await reply(ed, sid, "/memory log")
        await reply(ed, sid, f"/remember {FACT}")
        listed = await reply(ed, sid, "/memory log")
    assert empty == "No changes of the global or project notes in the memory history yet."
    head, line = listed.splitlines()
    assert head.startswith("Recent changes of the notes, newest first")
    assert line.startswith("- chg_") and f"  create  global:{NOTE}: new note, " in line
    assert f"by memory_run (session {sid}, task bg_1): " in line
    assert f'"Remember that {FACT}"' in line


async def test_memory_undo_undoes_the_last_runs_changes_in_one_step(paths: Paths) -> None:
    note = paths.home / "memory" / NOTE
    async with turn_agent(offline_memory(), paths) as (ed, _):
        sid = await ed.start_session(paths.cwd)
        nothing = await reply(ed, sid, "/memory undo")
        await reply(ed, sid, f"/remember {FACT}")
        assert note.is_file()
        undone = await reply(ed, sid, "/memory undo")
        gone = not note.exists()
        again = await reply(ed, sid, "/memory undo")
        listed = await reply(ed, sid, "/memory log")
    assert nothing == "No memory run in this session yet: nothing to undo."
    head, line = undone.splitlines()
    assert head == "Undid the 1 change of memory run bg_1:"
    assert line.startswith("- undid chg_") and line.endswith(
        f": removed global:{NOTE} (it did not exist before); the undo is "
        + line.rsplit("the undo is ", 1)[1])
    assert gone
    assert again == "The changes of the last memory run, bg_1, are undone already."
    # The undo is itself a change, made by this session's command.
    assert f"  undo  global:{NOTE}: undid chg_" in listed.splitlines()[1]
    assert listed.splitlines()[1].endswith(f"by command (session {sid})")


async def test_memory_undo_brings_back_the_bytes_a_forget_deleted(paths: Paths) -> None:
    notes = paths.home / "memory"
    notes.mkdir(parents=True)
    kept = b"# Tea\r\n\r\nI drink green tea every morning.\r\n"  # CRLF: bytes, not text
    (notes / "tea.md").write_bytes(kept)
    async with turn_agent(offline_memory(), paths) as (ed, _):
        sid = await ed.start_session(paths.cwd)
        await reply(ed, sid, "/remember My cat is called Tom")  # bg_1, kept
        forgot = await reply(ed, sid, f"/forget {FACT}")  # bg_2, the last run
        deleted = not (notes / "tea.md").exists()
        undone = await reply(ed, sid, "/memory undo")
    assert forgot.startswith("Deleted:") and deleted
    assert undone.startswith("Undid the 1 change of memory run bg_2:")
    assert ": restored global:tea.md; the undo is chg_" in undone
    assert (notes / "tea.md").read_bytes() == kept
    assert (notes / "my-cat-is-called-tom.md").is_file()


async def test_memory_undo_after_a_later_change_names_it_and_undoes_nothing(
    paths: Paths,
) -> None:
    note = paths.home / "memory" / NOTE
    async with turn_agent(offline_memory(), paths) as (ed, _):
        sid = await ed.start_session(paths.cwd)
        await reply(ed, sid, f"/remember {FACT}")
        note.write_text("edited in vim\n")
        by_hand = await reply(ed, sid, "/memory undo")
        with cli_store(paths) as store:
            store.write(f"global:{NOTE}", "then through notes edit\n")
            assert store.journal is not None
            (later, first) = store.journal.changes([store.roots.global_root], limit=2)
        refused = await reply(ed, sid, "/memory undo")
    # The run's line names the path and the change refused, the way to force it, and no more.
    expected = (f"Nothing was undone of memory run bg_1: global:{NOTE} changed since "
                f"({first.id}); /memory undo --force undoes anyway")
    assert by_hand == expected and refused == expected
    assert later.action == "update" and first.action == "create"
    assert note.read_text() == "then through notes edit\n"


async def test_memory_undo_of_a_run_refused_over_one_change_undoes_none_until_forced(
    paths: Paths,
) -> None:
    notes = paths.home / "memory"
    async with turn_agent(offline_memory(), paths) as (ed, agent):
        sid = await ed.start_session(paths.cwd)
        await reply(ed, sid, f"/remember {FACT}")  # bg_1's first change
        run = ChangeSource("memory_run", sid, "bg_1", f"remember {FACT}")
        with MemoryStore.from_config(Config(), paths, source=run) as store:
            store.write("global:b.md", "the run's last change\n")
        (notes / NOTE).write_text("edited in vim\n")
        journal = agent.runner.memory.journal()
        (first,) = journal.changes([notes], NOTE)
        refused = await reply(ed, sid, "/memory undo")
        kept = (notes / "b.md").read_text()
        undos = [c for c in journal.changes([notes]) if c.action == "undo"]
        forced = await reply(ed, sid, "/memory undo --force")
    assert refused == (f"Nothing was undone of memory run bg_1: global:{NOTE} changed since "
                       f"({first.id}); /memory undo --force undoes anyway")
    assert kept == "the run's last change\n" and undos == []
    assert forced.startswith("Undid the 2 changes of memory run bg_1:")
    assert not (notes / NOTE).exists() and not (notes / "b.md").exists()


async def test_memory_undo_of_a_run_that_changed_nothing_says_so(paths: Paths) -> None:
    async with turn_agent(offline_memory(), paths) as (ed, _):
        sid = await ed.start_session(paths.cwd)
        await reply(ed, sid, "What do I drink?")  # a recall: reads, never writes
        said = await reply(ed, sid, "/memory undo")
    assert said == "The last memory run, bg_1, changed no notes: nothing to undo."


def hold(journal: Journal, root: Path, rel: str, text: str, session_id: str) -> str:
    source = ChangeSource("memory_run", session_id, "bg_1", f"remember {text}")
    return journal.hold(("global", root, rel), "create", Captured(None),
                        Captured.note(text.encode()), source).id


async def test_memory_pending_approve_and_reject_act_on_this_sessions_held_changes(
    paths: Paths,
) -> None:
    notes = paths.home / "memory"
    notes.mkdir(parents=True)
    async with turn_agent(offline_memory(), paths) as (ed, agent):
        sid = await ed.start_session(paths.cwd)
        journal = agent.runner.memory.journal()
        none = await reply(ed, sid, "/memory pending")
        mine = hold(journal, notes, "tea.md", "tea\n", sid)
        dropped = hold(journal, notes, "coffee.md", "coffee\n", sid)
        theirs = hold(journal, notes, "other.md", "other\n", "sess_" + "b" * 24)
        listed = await reply(ed, sid, "/memory pending")
        not_mine = await reply(ed, sid, f"/memory approve {theirs}")
        rejected = await reply(ed, sid, f"/memory reject {dropped}")
        approved = await reply(ed, sid, "/memory approve")  # all of this session's
        left = [h.id for h in journal.held()]
    assert none == "No changes of this session are waiting for approval."
    lines = listed.splitlines()
    assert lines[0] == ("2 changes waiting for approval (/memory approve ID|all, /memory reject "
                        "ID|all):")
    assert lines[1].startswith(f"- {mine}  ")
    assert "  create  global:tea.md: new note, 4 bytes; by memory_run" in lines[1]
    assert dropped in lines[2] and theirs not in listed
    assert not_mine.startswith(f"no pending change {theirs!r} in this session")
    assert rejected == f"- rejected {dropped}: create global:coffee.md"
    assert approved == f"- approved {mine}: create global:tea.md"
    assert (notes / "tea.md").read_text() == "tea\n"
    assert not (notes / "coffee.md").exists() and not (notes / "other.md").exists()
    assert left == [theirs]


async def test_memory_with_an_unknown_word_says_how_to_use_it_and_help_names_the_words(
    paths: Paths,
) -> None:
    async with turn_agent(offline_memory(), paths) as (ed, _):
        sid = await ed.start_session(paths.cwd)
        usage = await reply(ed, sid, "/memory frobnicate")
        helped = await reply(ed, sid, "/help")
        status = await reply(ed, sid, "/memory")
    assert usage.startswith("Usage: /memory [log, undo [--force], pending, approve [ID|all], "
                            "reject")
    memory_line = next(line for line in helped.splitlines() if line.startswith("- /memory"))
    assert all(word in memory_line for word in ("log", "undo", "pending", "approve", "reject"))
    assert "No memory run in this session yet." in status  # /memory alone is as it was
