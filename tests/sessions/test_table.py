"""The session table every front end holds: one session object per id, a child session only
read, one turn at a time, a stop that cancels turns and refuses new ones, and a failed write
as one line naming the file."""

from __future__ import annotations

import errno
from pathlib import Path

import anyio
import pytest

from acp_memory.config import Paths
from acp_memory.sessions.store import BundleError, SessionNotFound, SessionStore
from acp_memory.sessions.table import (
    ReadOnlySession,
    SessionTable,
    SessionUnsaved,
    Stopping,
    TurnRunning,
    saving,
)

pytestmark = pytest.mark.anyio


def make_table(paths: Paths) -> tuple[SessionTable, SessionStore]:
    store = SessionStore(paths.sessions_dir)
    return SessionTable(store), store


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
    table, store = make_table(paths)
    sessions = [table.add(store.create(cwd=str(paths.cwd), model_id="m")) for _ in range(2)]
    assert all(s.lock.held for s in sessions)
    closed: list[str] = []
    table.close(closed.append)
    assert sorted(closed) == sorted(s.id for s in sessions)
    assert not any(s.lock.held for s in sessions)
    assert table.sessions == {}


async def test_a_failed_write_is_one_line_naming_the_file(paths: Paths, tmp_path: Path):
    session = SessionStore(paths.sessions_dir).create(cwd=str(paths.cwd), model_id="m")
    target = tmp_path / "session.json"
    with pytest.raises(SessionUnsaved) as err:
        with saving(session):
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
    assert str(err.value) == (
        f"session {session.id} cannot be saved: {target}: No space left on device"
    )
