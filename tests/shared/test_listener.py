"""The listener: a change another process commits reaches this process's local copy through its
NOTIFY; where LISTEN is refused, by polling; across a server restart, by reconnecting."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager

import anyio
import psycopg
import pytest

from acp_memory.config import Config, Paths
from acp_memory.config.models import MemoryConfig, SharedMemoryConfig
from acp_memory.memory.shared import listener as listener_module
from acp_memory.memory.shared.listener import Listener, Watched
from acp_memory.memory.shared.root import SharedRoot, close_all, shared_root_for
from acp_memory.memory.shared.schema import CHANNEL, SCHEMA

pytestmark = pytest.mark.anyio

KEY = "github.com/org/repo"
BOUND_S = 20  # generous: a loaded machine is slow, never wrong
NEVER_S = 3600.0  # the listener's quiet check: never within a test, so only a NOTIFY counts


@pytest.fixture(autouse=True)
def shared_roots_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The listener's waits at a test's pace: tenths of a second rather than seconds.
    for name, seconds in (("RETRY_FIRST_S", 0.05), ("RETRY_MAX_S", 0.2), ("POLL_S", 0.05)):
        monkeypatch.setattr(listener_module, name, seconds)
    yield
    close_all()  # the pools of this test's databases


def commit_note(dsn: str, path: str, body: str, *, notify: bool = True) -> int:
    """What another process's save commits: the note's row and its history record in one
    transaction, and (unless told not to) the NOTIFY; the change's seq."""
    sha = hashlib.sha256(body.encode()).hexdigest()
    with psycopg.connect(dsn) as conn:
        conn.execute(
            f"INSERT INTO {SCHEMA}.notes VALUES (%s, %s, %s, %s, now(), 'mate') ON CONFLICT "
            "(project, path) DO UPDATE SET body = excluded.body, sha256 = excluded.sha256",
            (KEY, path, body, sha))
        row = conn.execute(
            f"INSERT INTO {SCHEMA}.history (id, project, path, action, before, after, source, "
            "time) VALUES (%s, %s, %s, 'create', NULL, %s, '{}', now()) RETURNING seq",
            (f"chg_{uuid.uuid4().hex}", KEY, path, f"note:{sha}")).fetchone()
        assert row is not None
        if notify:
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{KEY} {row[0]}"))
    return int(row[0])


class Refreshes:
    """The listener's on_refreshed: wakes a test waiting for what a refresh brought."""

    def __init__(self) -> None:
        self.markers: list[str | None] = []
        self._changed = anyio.Event()

    def __call__(self, root: Watched, offline: str | None) -> None:
        self.markers.append(offline)
        self._changed.set()

    async def until(self, done: Callable[[], bool]) -> None:
        """Wait (bounded) until done() holds after a refresh."""
        with anyio.fail_after(BOUND_S):
            while not done():
                await self._changed.wait()
                self._changed = anyio.Event()


def shared_root(paths: Paths, dsn: str) -> SharedRoot:
    cfg = Config(memory=MemoryConfig(shared=SharedMemoryConfig(dsn=dsn)))
    return shared_root_for(cfg, paths, KEY)


def holds(root: SharedRoot, rel: str, body: str) -> Callable[[], bool]:
    note = root.root / rel
    return lambda: note.is_file() and note.read_text() == body


@asynccontextmanager
async def listening(
    root: SharedRoot, refreshes: Refreshes, statement: str | None = None
) -> AsyncIterator[Listener]:
    """A listener keeping root caught up, its first catch-up done (online)."""
    listener = Listener(root.database.dsn, root.database.masked, refreshes)
    listener.quiet_s = NEVER_S
    if statement is not None:
        listener.statement = statement
    listener.watch(root)
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.run)
        await refreshes.until(lambda: None in refreshes.markers)
        yield listener
        tg.cancel_scope.cancel()


async def test_a_change_committed_elsewhere_reaches_the_copy_through_its_notify(
    paths: Paths, pg_dsn: str
) -> None:
    root = shared_root(paths, pg_dsn)
    refreshes = Refreshes()
    async with listening(root, refreshes) as listener:
        await refreshes.until(lambda: listener.listening)
        seq = await anyio.to_thread.run_sync(commit_note, pg_dsn, "deploy.md", "# Deploy\nv2")
        await refreshes.until(holds(root, "deploy.md", "# Deploy\nv2"))
        assert root.copy.seq() == seq


async def test_where_listen_is_refused_polling_still_brings_a_change(
    paths: Paths, pg_dsn: str
) -> None:
    root = shared_root(paths, pg_dsn)
    refreshes = Refreshes()
    # As a transaction-pooling proxy refuses it: the server answers LISTEN with an error.
    async with listening(root, refreshes, statement="LISTEN") as listener:
        await refreshes.until(lambda: listener.polling)
        await anyio.to_thread.run_sync(
            lambda: commit_note(pg_dsn, "deploy.md", "# Deploy\nv3", notify=False))
        await refreshes.until(holds(root, "deploy.md", "# Deploy\nv3"))


async def test_the_listener_reconnects_after_a_server_restart_and_catches_up(
    paths: Paths, pg_dsn: str, pg_server
) -> None:
    root = shared_root(paths, pg_dsn)
    refreshes = Refreshes()
    async with listening(root, refreshes) as listener:
        await refreshes.until(lambda: listener.listening)
        try:
            await anyio.to_thread.run_sync(pg_server.stop)
            await refreshes.until(lambda: refreshes.markers[-1] is not None)
            assert "shared memory offline: synced" in str(refreshes.markers[-1])
        finally:
            await anyio.to_thread.run_sync(pg_server.start)
        await anyio.to_thread.run_sync(commit_note, pg_dsn, "a.md", "after the restart")
        await refreshes.until(lambda: listener.listening and holds(root, "a.md",
                                                                    "after the restart")())
        # Listening again: a later change comes by its NOTIFY alone.
        await anyio.to_thread.run_sync(commit_note, pg_dsn, "b.md", "and later")
        await refreshes.until(holds(root, "b.md", "and later"))
