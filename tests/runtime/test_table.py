"""The session table every front end holds: one session object per id, a child session only
read, one turn at a time, a stop that cancels turns and refuses new ones, a failed write
as one line naming the file, and idle sessions let go (after idle_seconds, or the least
recently used beyond max_open) and loaded again on demand."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakes.clock import FakeClock

from acp_memory.config import Paths
from acp_memory.runtime.table import (
    ReadOnlySession,
    SessionTable,
    SessionUnsaved,
    Stopping,
    TurnRunning,
    saving,
)
from acp_memory.sessions.lock import BundleBusy, BundleLock
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import BundleError, SessionNotFound, SessionStore

pytestmark = pytest.mark.anyio


def make_table(paths: Paths, **options: Any) -> tuple[SessionTable, SessionStore]:
    store = SessionStore(paths.sessions_dir)
    return SessionTable(store, **options), store


class Released(list[str]):
    """The table's on_release: the ids of the sessions let go, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = anyio.Event()

    def __call__(self, session_id: str) -> None:
        self.append(session_id)
        self.changed.set()
        self.changed = anyio.Event()


def idle_table(paths: Paths, **options: Any) -> tuple[SessionTable, SessionStore, FakeClock,
                                                      Released]:
    clock, released = FakeClock(), Released()
    table, store = make_table(paths, clock=clock, on_release=released, **options)
    return table, store, clock, released


def lockable(session_dir: Path) -> bool:
    """Whether another process could take the bundle's lock now."""
    other = BundleLock(session_dir)
    try:
        other.acquire()
    except BundleBusy:
        return False
    other.release()
    return True


async def test_a_session_is_loaded_once_and_concurrent_loads_share_one_object(paths: Paths):
    table, store = make_table(paths)
    made = store.create(cwd=str(paths.cwd), model_id="m")
    made.close()
    results = []

    async def load() -> None:
        results.append(await table.get(made.id))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(load)
    assert len({id(s) for s in results}) == 1
    (made.dir / "session.json").unlink()  # never read again: a later get is the one object
    assert await table.get(made.id) is results[0]


async def test_unknown_and_corrupt_sessions_raise_the_stores_errors(paths: Paths):
    table, store = make_table(paths)
    with pytest.raises(SessionNotFound):
        await table.get("sess_" + "0" * 24)
    broken = store.create(cwd=str(paths.cwd), model_id="m")
    broken.close()
    (broken.dir / "session.json").write_text("{not json")
    with pytest.raises(BundleError):
        await table.get(broken.id)


async def test_a_child_session_is_read_but_never_writable(paths: Paths):
    table, store = make_table(paths)
    parent = store.create(cwd=str(paths.cwd), model_id="m")
    child = store.create(
        cwd=str(paths.cwd), model_id="m", parent=parent, subagent_name="memory"
    )
    table.add(parent)
    table.add(child)
    assert await table.writable(parent.id) is parent
    assert await table.get(child.id) is child
    with pytest.raises(ReadOnlySession) as err:
        await table.writable(child.id)
    assert str(err.value) == (
        f"{child.id} is a child session that memory ran for {parent.id}; it is read-only"
    )


async def test_one_turn_at_a_time_and_cancel_reaches_the_running_turn(paths: Paths):
    table, store = make_table(paths)
    session = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
    assert not table.cancel(session.id)  # none runs
    scope = table.claim(session)
    assert table.running(session.id)
    with pytest.raises(TurnRunning, match="already running a prompt"):
        table.claim(session)
    assert table.cancel(session.id) and scope.cancel_called
    table.release(session)
    assert not table.running(session.id)
    table.release(session)  # twice is harmless
    assert table.claim(session) is not scope


async def test_stop_cancels_every_turn_and_refuses_new_ones(paths: Paths):
    table, store = make_table(paths)
    first = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
    second = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
    scope = table.claim(first)
    table.stop()
    assert scope.cancel_called
    with pytest.raises(Stopping):
        table.claim(second)


async def test_close_stops_each_sessions_pool_and_releases_its_bundle(paths: Paths):
    closed: list[str] = []
    table, store = make_table(paths, on_release=closed.append)
    sessions = [table.add(store.create(cwd=str(paths.cwd), model_id="m")) for _ in range(2)]
    assert all(s.lock.held for s in sessions)
    table.close()
    assert sorted(closed) == sorted(s.id for s in sessions)
    assert not any(s.lock.held for s in sessions)
    assert table.sessions == {}


async def test_an_idle_session_is_let_go_after_idle_seconds_its_lock_and_pool_with_it(
    paths: Paths,
):
    table, store, clock, released = idle_table(paths, idle_seconds=300)
    session = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
    clock.advance(299.9)
    table.release_idle()
    assert session.id in table.sessions and session.lock.held and released == []
    clock.advance(0.1)
    table.release_idle()
    assert table.sessions == {} and released == [session.id]
    assert not session.lock.held and lockable(session.dir)


async def test_the_timer_lets_idle_sessions_go_on_the_tables_clock(paths: Paths):
    table, store, clock, released = idle_table(paths, idle_seconds=300)
    async with table.releasing():
        session = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
        with anyio.fail_after(5):
            assert await clock.until_pending(1) == [300.0]
        clock.advance(300)
        with anyio.fail_after(5):
            await released.changed.wait()
    assert released == [session.id] and not session.lock.held


async def test_beyond_max_open_the_least_recently_used_idle_session_goes_first(paths: Paths):
    table, store, _, released = idle_table(paths, max_open=2)
    first, second = (table.add(store.create(cwd=str(paths.cwd), model_id="m")) for _ in "ab")
    await table.get(first.id)  # used again: now the second is the least recently used
    third = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
    assert released == [second.id] and list(table.sessions) == [first.id, third.id]
    assert not second.lock.held and first.lock.held and third.lock.held
    await table.get(second.id)  # loaded again on demand: the first goes now
    assert released == [second.id, first.id]
    assert list(table.sessions) == [third.id, second.id]


async def test_a_session_in_a_turn_a_write_or_in_use_by_the_front_end_is_never_let_go(
    paths: Paths,
):
    using: set[str] = set()
    table, store, clock, released = idle_table(paths, idle_seconds=300, in_use=using.__contains__)
    turn, watched, writing, plain = (
        table.add(store.create(cwd=str(paths.cwd), model_id="m")) for _ in "abcd"
    )
    table.claim(turn)
    using.add(watched.id)  # what the front end holds: a background task, an events stream
    async with writing._writing:  # a write under way: its lock must not go mid-write
        clock.advance(300)
        table.release_idle()
        assert set(table.sessions) == {turn.id, watched.id, writing.id}
    assert released == [plain.id]
    assert turn.lock.held and watched.lock.held and writing.lock.held
    table.release(turn)
    using.clear()
    table.release_idle()  # found in use a moment ago: their idle time starts then
    assert set(table.sessions) == {turn.id, watched.id, writing.id}
    clock.advance(300)
    table.release_idle()
    assert table.sessions == {} and not (turn.lock.held or watched.lock.held)


async def test_beyond_max_open_a_session_in_use_stays_and_the_idle_ones_go(paths: Paths):
    using: set[str] = set()
    table, store, _, released = idle_table(paths, max_open=1, in_use=using.__contains__)
    turn = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
    table.claim(turn)
    watched = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
    using.add(watched.id)
    newest = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
    assert released == [] and len(table.sessions) == 3  # over the bound while in use
    table.release(turn)  # the turn ended, the newest use: the idle one older than it goes
    assert released == [newest.id] and list(table.sessions) == [watched.id, turn.id]
    using.clear()
    plain = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
    assert released == [newest.id, watched.id, turn.id] and list(table.sessions) == [plain.id]


async def test_a_session_let_go_is_loaded_again_on_demand_with_its_transcript(paths: Paths):
    table, store, clock, released = idle_table(paths, idle_seconds=300)
    session = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
    await session.append(TranscriptMessage(role="user", content="remember the blue door"))
    session_id, folder = session.id, session.dir
    clock.advance(300)
    table.release_idle()
    del session  # nobody holds it any more: it is gone from memory
    assert lockable(folder) and released == [session_id]
    again = await table.get(session_id)
    assert [m.content for m in again.messages] == ["remember the blue door"]
    await again.append(TranscriptMessage(role="assistant", content="noted"))
    assert again.lock.held and table.sessions == {session_id: again}
    assert [m.content for m in (await anyio.to_thread.run_sync(store.load, session_id)).messages] \
        == ["remember the blue door", "noted"]


async def test_a_session_let_go_while_a_caller_holds_it_stays_one_object_and_relocks_open(
    paths: Paths,
):
    table, store, clock, released = idle_table(paths, idle_seconds=300)
    held = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
    clock.advance(300)
    table.release_idle()
    assert await table.get(held.id) is held  # never a second object for one bundle
    clock.advance(300)
    table.release_idle()
    assert held.id not in table.sessions and not held.lock.held
    await held.save_record()  # a caller that kept it writes it: its lock is taken again
    assert held.lock.held and table.sessions == {held.id: held}
    clock.advance(300)
    table.release_idle()  # so it is let go again, never left holding a descriptor
    assert not held.lock.held and released == [held.id] * 3


async def test_a_write_after_another_process_took_the_lock_of_a_released_session_is_busy(
    paths: Paths,
):
    table, store, _, _ = idle_table(paths, max_open=1)
    first = table.add(store.create(cwd=str(paths.cwd), model_id="m"))
    table.add(store.create(cwd=str(paths.cwd), model_id="m"))  # lets the first go
    other = BundleLock(first.dir)
    other.acquire()  # refused with BundleBusy if the first had kept its lock
    try:
        again = await table.get(first.id)
        with pytest.raises(BundleBusy, match="another acp-memory process"):
            await again.append(TranscriptMessage(role="user", content="hi"))
    finally:
        other.release()


async def test_a_failed_write_is_one_line_naming_the_file(paths: Paths, tmp_path: Path):
    session = SessionStore(paths.sessions_dir).create(cwd=str(paths.cwd), model_id="m")
    target = tmp_path / "session.json"
    with pytest.raises(SessionUnsaved) as err:
        with saving(session):
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
    assert str(err.value) == (
        f"session {session.id} cannot be saved: {target}: No space left on device"
    )
