"""Sessions on a shared project root (memory.shared) as the runner serves them: a server out of
reach is one line per session, notes of `<cwd>/memory` not in the shared store are said once
per process and folder, and a change another machine commits reaches the session's copy."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from engine.turnkit import turn_agent
from harness import Editor

from acp_memory.acp.agent import AcpAgent
from acp_memory.config import Config, Paths
from acp_memory.config.models import MemoryConfig, SharedMemoryConfig
from acp_memory.memory.shared import listener as listener_module
from acp_memory.memory.shared.dsn import mask_dsn
from acp_memory.memory.shared.listener import Listener, Watched
from acp_memory.memory.shared.root import SharedRoot, close_all
from acp_memory.memory.store import MemoryStore

pytestmark = pytest.mark.anyio

KEY = "github.com/team/repo"
PASSWORD = "pw-s3cret-9d2"
# A server that is not there: its socket folder does not exist, so a connect fails at once.
UNREACHABLE = f"postgresql://alice:{PASSWORD}@/team?host=/nonexistent-acp-memory-pg"
BOUND_S = 30
OUTAGE_END = "; searching the local copy, writes refused"


def shared_config(dsn: str) -> Config:
    cfg = Config()  # the offline model
    cfg.memory = MemoryConfig(enable=True, shared=SharedMemoryConfig(dsn=dsn, project=KEY))
    return cfg


@pytest.fixture(autouse=True)
def shared_roots_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The listener's waits at a test's pace: its retries, polls and quiet checks come in
    # tenths of a second rather than seconds (what they do is the same).
    for name, seconds in (("RETRY_FIRST_S", 0.05), ("RETRY_MAX_S", 0.2), ("POLL_S", 0.05)):
        monkeypatch.setattr(listener_module, name, seconds)
    yield
    close_all()


class Said(logging.Handler):
    """The runtime's log lines, waking a test that waits for one."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self._more = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self._more.set()

    def matching(self, part: str) -> list[str]:
        return [line for line in self.lines if part in line]

    async def until(self, done: Callable[[], bool]) -> None:
        with anyio.fail_after(BOUND_S):
            while not done():
                await self._more.wait()
                self._more = anyio.Event()


@pytest.fixture
def said() -> Iterator[Said]:
    handler = Said()
    logger = logging.getLogger("acp_memory")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


class Refreshes:
    """Counts the listener's refreshes (wrapping its on_refreshed) and wakes a waiting test."""

    def __init__(self, listener: Listener) -> None:
        self.count = 0
        self._then = listener.on_refreshed
        self._more = anyio.Event()
        listener.on_refreshed = self

    def __call__(self, root: Watched, offline: str | None) -> None:
        if self._then is not None:
            self._then(root, offline)
        self.count += 1
        self._more.set()

    async def more(self, n: int = 1) -> None:
        """Wait (bounded) until n more refreshes are done."""
        goal = self.count + n
        with anyio.fail_after(BOUND_S):
            while self.count < goal:
                await self._more.wait()
                self._more = anyio.Event()


@asynccontextmanager
async def served(cfg: Config, paths: Paths) -> AsyncIterator[tuple[Editor, AcpAgent]]:
    async with turn_agent(cfg, paths) as (ed, agent):
        yield ed, agent


def listener_of(agent: AcpAgent) -> Listener:
    listeners = list(agent.runner.memory.shared.listeners.values())
    assert len(listeners) == 1
    return listeners[0]


async def test_a_server_out_of_reach_is_one_line_per_session_never_showing_the_password(
    paths: Paths, said: Said
) -> None:
    async with served(shared_config(UNREACHABLE), paths) as (ed, agent):
        first = await ed.start_session(paths.cwd)
        await said.until(lambda: len(said.matching(OUTAGE_END)) == 1)
        refreshes = Refreshes(listener_of(agent))
        await refreshes.more(2)  # the listener tried again, twice: still down, said already
        assert len(said.matching(OUTAGE_END)) == 1
        second = await ed.start_session(paths.cwd)
        await said.until(lambda: len(said.matching(OUTAGE_END)) == 2)
        await refreshes.more(1)
        assert first != second
    lines = said.matching(OUTAGE_END)
    assert len(lines) == 2
    head = f"shared project memory {mask_dsn(UNREACHABLE)}: cannot connect: "
    assert all(line.startswith(head) and line.endswith(OUTAGE_END) for line in lines), lines
    assert "alice:***@" in lines[0]
    assert not [line for line in said.lines if PASSWORD in line]


async def test_notes_of_the_cwds_memory_not_in_the_shared_store_are_said_once(
    paths: Paths, said: Said, pg_dsn: str, tmp_path: Path
) -> None:
    cfg = shared_config(pg_dsn)
    # A team mate imported build.md already; the two others are only on this disk.
    mate_home = tmp_path / "mate"
    mate = MemoryStore.from_config(cfg, Paths(home=mate_home, config_file=mate_home / "c.yaml",
                                              sessions_dir=mate_home / "s", cwd=tmp_path))
    with mate:
        mate.write("project:build.md", "# Build\nmake all")
    folder = paths.cwd / "memory"
    (folder / "ops").mkdir(parents=True)
    for rel in ("build.md", "deploy.md", "ops/oncall.md"):
        (folder / rel).write_text(f"# {rel}\n")
    hint = "not in the shared project memory"
    async with served(cfg, paths) as (ed, agent):
        await ed.start_session(paths.cwd)
        await said.until(lambda: len(said.matching(hint)) == 1)
        refreshes = Refreshes(listener_of(agent))
        await ed.start_session(paths.cwd)
        await refreshes.more(1)  # the second session's catch-up: nothing more said
    assert said.matching(hint) == [
        f"{folder} holds 2 notes not in the shared project memory (project (shared: {KEY})); "
        f"copy them there with `acp-memory notes import project: {folder}`"]


async def test_a_change_another_machine_commits_reaches_the_sessions_copy_at_once(
    paths: Paths, pg_dsn: str, tmp_path: Path
) -> None:
    cfg = shared_config(pg_dsn)
    mate_home = tmp_path / "mate"
    mate = MemoryStore.from_config(cfg, Paths(home=mate_home, config_file=mate_home / "c.yaml",
                                              sessions_dir=mate_home / "s", cwd=tmp_path))
    async with served(cfg, paths) as (ed, agent):
        await ed.start_session(paths.cwd)
        listener = listener_of(agent)
        refreshes = Refreshes(listener)
        with anyio.fail_after(BOUND_S):
            while not listener.listening:
                await refreshes.more(1)
        root = listener.roots[KEY]
        assert isinstance(root, SharedRoot)
        with mate:
            await anyio.to_thread.run_sync(mate.write, "project:deploy.md", "# Deploy\nv2")
        note = root.root / "deploy.md"
        with anyio.fail_after(BOUND_S):
            while not note.is_file():
                await refreshes.more(1)
        assert note.read_text() == "# Deploy\nv2"


async def test_a_cwd_without_a_project_key_keeps_its_notes_on_disk_saying_why_once(
    paths: Paths, said: Said
) -> None:
    cfg = shared_config(UNREACHABLE)
    cfg.memory.shared.project = ""  # and the cwd is in no git repository: no key
    async with served(cfg, paths) as (ed, agent):
        for _ in range(2):
            await ed.start_session(paths.cwd)
        assert agent.runner.memory.shared.listeners == {}  # nothing shared: nothing to listen to
    assert said.matching("shared project memory is off") == [
        f"shared project memory is off for {paths.cwd}: {paths.cwd} is not in a git repository;"
        f" set memory.shared.project to share its notes; its project notes stay in "
        f"{paths.cwd / 'memory'}"]
