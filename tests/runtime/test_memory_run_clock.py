"""The memory run's bounds on the runner's clock: the run timeout and the wait for running
runs when the agent stops, proven on a clock the test moves by hand (no real waiting)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from engine.turnkit import prompt, turn_agent
from fakes.clock import FakeClock
from fakes.script import Reply, error, text
from runtime.test_memory_run import (
    REPORT,
    MemoryRoutedOpenAI,
    memory_config,
    memory_updates,
    meta,
    task_log,
)

from acp_memory.engine.events import TurnEvent
from acp_memory.runtime import memory_run
from acp_memory.runtime.memory_run import SEND_BOUND_SECONDS
from acp_memory.runtime.memory_service import MEMORY_EXIT_WAIT_SECONDS

pytestmark = pytest.mark.anyio


async def test_a_run_past_its_timeout_is_timed_out_with_the_seed_reason(paths):
    clock = FakeClock()
    never = anyio.Event()
    parent_asked, parent_go = anyio.Event(), anyio.Event()
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT).stalled_after(0, never)]

        def parent_reply(_: object) -> Reply:
            parent_asked.set()
            return text("answered").stalled_after(0, parent_go)

        server.script(parent_reply)
        cfg = memory_config(server, wait_seconds=10, timeout_seconds=300)
        async with turn_agent(cfg, paths) as (ed, agent):
            agent.runner.clock = clock
            sid = await ed.start_session(paths.cwd)
            async with anyio.create_task_group() as tg:

                async def drive() -> None:
                    with anyio.fail_after(10):
                        pending = await clock.until_pending(2)
                    assert pending == [10.0, 300.0]  # the turn's wait, the run's limit
                    clock.advance(10)  # the turn stops waiting and asks its model
                    with anyio.fail_after(10):
                        await parent_asked.wait()
                    clock.advance(290)  # the run reaches its limit while the turn goes on
                    task = agent.runner.pool_for(agent.table.sessions[sid]).get("bg_1")
                    assert task is not None
                    with anyio.fail_after(10):
                        await task.done.wait()
                    parent_go.set()

                tg.start_soon(drive)
                assert await prompt(ed, sid, "what do I like?") == "end_turn"
            updates = memory_updates(ed)
    reason = "timed out after 300s"
    finished = updates[-1]
    assert finished["status"] == "finished" and finished["taskStatus"] == "timed_out"
    assert finished["reason"] == reason and finished["delivered"] is False
    assert meta(paths, sid, "bg_1")["status"] == "timed_out"
    assert task_log(paths, sid, "bg_1").splitlines()[-1] == f"nothing delivered: the run {reason}"


async def test_stopping_waits_fifteen_seconds_for_a_running_run_then_stops_it(paths):
    clock = FakeClock()
    never = anyio.Event()
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT).stalled_after(0, never)]
        server.script(text("ok"))
        async with anyio.create_task_group() as tg:
            async with turn_agent(memory_config(server, wait_seconds=0), paths) as (ed, agent):
                runner = agent.runner
                runner.clock = clock
                assert runner.memory.exit_wait_seconds == MEMORY_EXIT_WAIT_SECONDS == 15
                sid = await ed.start_session(paths.cwd)
                assert await prompt(ed, sid, "hello") == "end_turn"
                task = runner.pool_for(agent.table.sessions[sid]).get("bg_1")
                assert task is not None

                moved: list[float] = []

                async def move_time_while_draining() -> None:
                    await runner.memory.draining.wait()
                    # The run's 300 s limit and the exit wait's 15 s, on the same clock.
                    assert await clock.until_pending(2) == [15.0, 300.0]
                    clock.advance(14.9)
                    await anyio.wait_all_tasks_blocked()
                    assert clock.pending() == [15.0, 300.0]  # still given its grace
                    assert not task.done.is_set()
                    clock.advance(0.1)
                    moved.append(clock.now())

                tg.start_soon(move_time_while_draining)
                tg.cancel_scope.deadline = anyio.current_time() + 30  # a drain never begun
            # End of input: the agent stopped once the 15 s were up, and the run with it.
    assert moved == [15.0]  # the drain did wait, and only its bound ended it
    assert task.done.is_set()
    assert meta(paths, sid, "bg_1")["status"] == "stopped"
    assert task_log(paths, sid, "bg_1").splitlines()[-1] == "nothing delivered: the run was stopped"


async def test_a_client_that_never_takes_the_finished_update_cannot_hold_the_turn_past_a_cancel(
    paths, monkeypatch
):
    """The finished update of a run that settled without delivering goes out at the end of
    the turn, shielded; a client that stops reading must not keep run_turn alive, and the
    delivery line reaches the log while the send is still stuck."""
    clock = FakeClock()
    stuck, never, written = anyio.Event(), anyio.Event(), anyio.Event()
    last_line_while_stuck: list[str] = []
    append_lines = memory_run._append_lines

    def append_and_say(path: Path, lines: list[str]) -> None:  # on the event loop
        append_lines(path, lines)
        written.set()

    monkeypatch.setattr(memory_run, "_append_lines", append_and_say)

    async with MemoryRoutedOpenAI() as server:
        server.child = [error(500, "memory model down")]
        server.script(text("answered"))
        async with turn_agent(memory_config(server, wait_seconds=10), paths) as (ed, agent):
            runner = agent.runner
            runner.clock = clock
            sid = await ed.start_session(paths.cwd)
            session = agent.table.sessions[sid]

            async def notify(update: dict[str, Any]) -> None:
                if update["status"] == "finished":
                    stuck.set()
                    await never.wait()  # a client whose outbox is full

            async def emit(event: TurnEvent) -> None:
                return None

            ended = anyio.Event()
            async with anyio.create_task_group() as tg:
                turn = anyio.CancelScope()

                async def run() -> None:
                    with turn:
                        await runner.run_turn(session, "hello", emit, notify_memory=notify)
                    ended.set()

                tg.start_soon(run)
                try:
                    with anyio.fail_after(10):
                        await stuck.wait()
                        await written.wait()
                    last_line_while_stuck.append(task_log(paths, sid, "bg_1").splitlines()[-1])
                    turn.cancel()
                    await anyio.wait_all_tasks_blocked()
                    assert not ended.is_set()  # the end of a turn is shielded: its bound ends it
                    clock.advance(SEND_BOUND_SECONDS)
                    with anyio.fail_after(10):
                        await ended.wait()
                finally:
                    never.set()  # a failed test must not hang on the stuck client
    reason = "500 Internal Server Error: memory model down"
    assert last_line_while_stuck == [f"nothing delivered: the run failed: {reason}"]
