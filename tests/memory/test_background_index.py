"""Indexes built in the background: a search meanwhile scans the files and says so; a root
changed while no agent ran is brought up to date by its stamps; a session opening starts it.

The build is held half-way by a gate in FileSync's reading of the notes (the index is then
neither empty nor ready), and released by the test; every wait is bounded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from engine.turnkit import fake_config, turn_agent
from fakes.embeddings_server import FakeEmbeddings, keyed

from acp_memory.config import Config, Paths
from acp_memory.config.models import EmbeddingsConfig, MemoryConfig, ProviderConfig
from acp_memory.llm.embeddings import embeddings_for
from acp_memory.memory import scan as scan_module
from acp_memory.memory.index import keeper as keeper_module
from acp_memory.memory.index.indexes import SearchIndexes
from acp_memory.memory.index.keeper import IndexKeeper
from acp_memory.memory.index.sync import FileSync, Row
from acp_memory.memory.roots import Roots
from acp_memory.memory.scan import SCANS, scan_notes
from acp_memory.memory.store import MemoryStore
from acp_memory.memory.tools import memory_tools
from acp_memory.text.analyze import parse_query
from acp_memory.tools.base import Tool, ToolContext

pytestmark = pytest.mark.anyio

CTX = ToolContext(session_id="sess_test", cwd=Path("/"), mode="agent")
BOUND_S = 10
# Enough notes for the pipelined build (more than two of its batches).
MANY = 600
BUILDING = "(index still building: direct scan)"


def write_many(root: Path, count: int = MANY) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (root / f"n{i:04}.md").write_text(f"Routine note number {i} about the garden.")
    (root / "heron.md").write_text("A grey heron fishes in the pond at dawn.")


class HeldBuild:
    """Holds every index build after its first note until `release`; `reading` is set then."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reading = threading.Event()
        self.released = threading.Event()
        real = FileSync._rows

        def held(sync: FileSync, todo: Iterable[tuple[str, Any]]) -> Iterator[Row]:
            for n, row in enumerate(real(sync, todo)):
                if n == 1:
                    self.reading.set()
                    assert self.released.wait(BOUND_S), "the test never released the build"
                yield row

        monkeypatch.setattr(FileSync, "_rows", held)

    async def wait_reading(self) -> None:
        assert await anyio.to_thread.run_sync(self.reading.wait, BOUND_S)

    def release(self) -> None:
        self.released.set()


class Finished:
    """The roots the keeper finished with (built, then embedded), in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.roots: list[Path] = []
        self._changed = anyio.Event()
        real = IndexKeeper._keep

        async def watched(keeper: IndexKeeper, root: Path) -> None:
            try:
                await real(keeper, root)
            finally:
                self.roots.append(root)
                self._changed.set()
                self._changed = anyio.Event()

        monkeypatch.setattr(IndexKeeper, "_keep", watched)

    async def wait_for(self, root: Path, times: int = 1) -> None:
        with anyio.fail_after(BOUND_S):
            while self.roots.count(root) < times:  # roots are absolute here
                await self._changed.wait()


def embedding_indexes(server: FakeEmbeddings, tmp_path: Path, key: str = "") -> SearchIndexes:
    """Search indexes whose embeddings model the fake server serves."""
    provider = ProviderConfig(name="emb", type="openai", api_base=server.base_url, api_key=key)
    cfg = Config(providers=[provider],
                 memory=MemoryConfig(embeddings=EmbeddingsConfig(model="emb/e")))
    return SearchIndexes(tmp_path / "cache", embeddings=embeddings_for(cfg))


def search_tool(store: MemoryStore) -> Tool:
    return {t.name: t for t in memory_tools(store, MemoryConfig(max_search_hits=3))}[
        "memory_search"
    ]


async def test_a_search_during_the_background_build_scans_the_files_and_says_so(
    roots: Roots, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_many(roots.global_root)
    held, finished = HeldBuild(monkeypatch), Finished(monkeypatch)
    query = {"query": "heron pond", "scope": "global"}
    with SearchIndexes(tmp_path / "cache") as indexes:
        async with anyio.create_task_group() as owner:
            IndexKeeper(indexes, lambda: owner)
            store = MemoryStore(roots, tmp_path / "cache", 16 * 1024, indexes=indexes)
            tool = search_tool(store)
            # The first search asks the keeper for the build and scans meanwhile.
            with anyio.fail_after(BOUND_S):
                first = await tool.run(query, CTX)
            assert first.text.startswith(BUILDING + "\n") and "global:heron.md" in first.text
            await held.wait_reading()  # the build is under way, half done
            with anyio.fail_after(BOUND_S):
                during = await anyio.to_thread.run_sync(store.search, "heron pond", "global", 3)
            assert during.partial and [h.path for h in during] == ["global:heron.md"]
            with anyio.fail_after(BOUND_S):
                nothing = await tool.run({"query": "kingfisher", "scope": "global"}, CTX)
            assert nothing.text == f"{BUILDING}\nno matching notes for 'kingfisher' in global."
            assert not indexes.ready(roots.global_root)
            held.release()
            await finished.wait_for(roots.global_root)
            with anyio.fail_after(BOUND_S):
                after = await tool.run(query, CTX)
                hits = await anyio.to_thread.run_sync(store.search, "heron pond", "global", 3)
            assert not after.text.startswith("(") and "global:heron.md" in after.text
            assert not hits.partial and hits[0].path == "global:heron.md"


async def test_a_search_during_the_build_ranks_the_note_holding_the_identifier_whole_first(
    roots: Roots, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every note holds a ZEPHYR_ identifier, so each matches the query's word `zephyr`; only
    # one holds ZEPHYR_0C8A itself (another a longer identifier it begins), and its name sorts
    # last among the ties.
    root = roots.global_root
    root.mkdir(parents=True, exist_ok=True)
    for i in range(MANY):
        (root / f"n{i:04}.md").write_text(f"Build flag ZEPHYR_{i + 0x1000:04X} is set.")
    (root / "zz.md").write_text("Build flag ZEPHYR_0C8A is set.")
    (root / "aa.md").write_text("Build flag ZEPHYR_0C8A_OLD was set.")
    held = HeldBuild(monkeypatch)
    with SearchIndexes(tmp_path / "cache") as indexes:
        async with anyio.create_task_group() as owner:
            IndexKeeper(indexes, lambda: owner)
            store = MemoryStore(roots, tmp_path / "cache", 16 * 1024, indexes=indexes)
            with anyio.fail_after(BOUND_S):
                await anyio.to_thread.run_sync(store.search, "ZEPHYR_0C8A", "global", 3)
            await held.wait_reading()
            with anyio.fail_after(BOUND_S):
                during = await anyio.to_thread.run_sync(store.search, "ZEPHYR_0C8A", "global", 3)
            held.release()
    assert during.partial and during[0].path == "global:zz.md"
    assert during[0].score > during[1].score and during.total == MANY + 2


async def test_a_scan_gives_way_to_the_index_once_it_is_ready(
    roots: Roots, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_many(roots.global_root)
    held = HeldBuild(monkeypatch)
    ready = threading.Event()
    read = scan_module._read

    def read_then_finish_the_build(path: str) -> bytes | None:
        held.release()  # the index becomes ready early in the scan
        assert ready.wait(BOUND_S)
        return read(path)

    monkeypatch.setattr(scan_module, "_read", read_then_finish_the_build)
    monkeypatch.setattr(keeper_module, "GIVE_WAY_S", 0)  # this scan waits for the build
    with SearchIndexes(tmp_path / "cache") as indexes:
        build = indexes.build

        def build_then_say(root: Path, *args: Any) -> bool:
            try:
                return build(root, *args)
            finally:
                ready.set()

        monkeypatch.setattr(indexes, "build", build_then_say)
        async with anyio.create_task_group() as owner:
            IndexKeeper(indexes, lambda: owner)
            store = MemoryStore(roots, tmp_path / "cache", 16 * 1024, indexes=indexes)
            with anyio.fail_after(BOUND_S):
                hits = await anyio.to_thread.run_sync(store.search, "heron pond", "global", 3)
    assert not hits.partial and [h.path for h in hits] == ["global:heron.md"]


async def test_a_build_gives_way_to_a_running_scan_and_goes_on_once_it_ends(
    roots: Roots, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = roots.global_root
    write_many(root)
    finished = Finished(monkeypatch)
    scanning, scan_may_end = threading.Event(), threading.Event()
    scan_held = True

    def held_then_gives_up() -> bool:  # the scan's first look, after 256 files
        nonlocal scan_held
        scanning.set()
        assert scan_may_end.wait(BOUND_S), "the test never let the scan end"
        scan_held = False
        return True

    paused = threading.Event()
    scan_held_when_going_on: list[bool] = []
    give_way = SCANS.give_way

    def watched(timeout: float, outlasted: set[int]) -> None:  # the build, between batches
        paused.set()
        give_way(timeout, outlasted)
        scan_held_when_going_on.append(scan_held)

    monkeypatch.setattr(SCANS, "give_way", watched)
    monkeypatch.setattr(keeper_module, "GIVE_WAY_S", 2 * BOUND_S)  # longer than the test holds
    with SearchIndexes(tmp_path / "cache") as indexes:
        async with anyio.create_task_group() as owner:
            keeper = IndexKeeper(indexes, lambda: owner)
            async with anyio.create_task_group() as scan:
                scan.start_soon(anyio.to_thread.run_sync, lambda: scan_notes(
                    [("global", root)], parse_query("heron"), 3, held_then_gives_up))
                assert await anyio.to_thread.run_sync(scanning.wait, BOUND_S)
                keeper.keep([root])
                assert await anyio.to_thread.run_sync(paused.wait, BOUND_S)
                assert not indexes.ready(root)  # before its first batch
                scan_may_end.set()
            await finished.wait_for(root.absolute())
        assert indexes.ready(root)
    # Every batch began once the scan had ended.
    assert scan_held_when_going_on and not any(scan_held_when_going_on)


async def test_stopping_the_owner_mid_build_stops_the_build_quietly(
    roots: Roots, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_many(roots.global_root)
    held = HeldBuild(monkeypatch)
    with SearchIndexes(tmp_path / "cache") as indexes:
        async with anyio.create_task_group() as owner:
            IndexKeeper(indexes, lambda: owner).keep([roots.global_root])
            await held.wait_reading()
            owner.cancel_scope.cancel()  # the agent shuts down while the build runs
            held.release()  # its next batch finds the owner gone
        assert not indexes.ready(roots.global_root)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_without_a_keeper_the_search_builds_the_index_itself(
    roots: Roots, tmp_path: Path
) -> None:
    write_many(roots.global_root, 10)
    with MemoryStore(roots, tmp_path / "cache", 16 * 1024) as store:
        hits = store.search("heron pond", "global", 3)
    assert not hits.partial and [h.path for h in hits] == ["global:heron.md"]


async def test_a_root_changed_while_no_agent_ran_is_brought_up_to_date_by_its_stamps(
    roots: Roots, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = roots.global_root
    write_many(root)
    with SearchIndexes(tmp_path / "cache") as first:
        assert first.build(root)
    # While no agent runs: two notes edited, one deleted, one added.
    (root / "n0007.md").write_text("The kingfisher came back to the willow.")
    (root / "n0300.md").write_text("Routine note number 300, now about the kingfisher too.")
    (root / "n0400.md").unlink()
    (root / "new.md").write_text("A new note on the kingfisher's nest.")
    indexed: list[str] = []
    real = FileSync._rows

    def counted(sync: FileSync, todo: Iterable[tuple[str, Any]]) -> Iterator[Row]:
        listed = list(todo)
        indexed.extend(rel for rel, _ in listed)
        return real(sync, listed)

    monkeypatch.setattr(FileSync, "_rows", counted)
    finished = Finished(monkeypatch)
    with SearchIndexes(tmp_path / "cache") as indexes:
        async with anyio.create_task_group() as owner:
            IndexKeeper(indexes, lambda: owner).keep([root])
            await finished.wait_for(root)
        assert sorted(indexed) == ["n0007.md", "n0300.md", "new.md"]
        with indexes._lease(root) as index:
            assert index._sync.changes == 4  # the three read, and the one deleted
        store = MemoryStore(roots, tmp_path / "cache", 16 * 1024, indexes=indexes)
        hits = store.search("kingfisher", "global", 8)
        assert sorted(h.path for h in hits) == ["global:n0007.md", "global:n0300.md",
                                                "global:new.md"]
        assert not hits.partial
        assert "global:n0400.md" not in [h.path for h in store.search("number 400", "global")]


async def test_the_keeper_embeds_what_changed_and_retries_a_failed_batch_later(
    roots: Roots, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    root = roots.global_root
    write_many(root, 5)
    finished = Finished(monkeypatch)
    caplog.set_level(logging.WARNING, "acp_memory.memory.index.keeper")
    vector_of = keyed({"heron": [1.0, 0.0]}, default=[0.0, 1.0])
    async with FakeEmbeddings(vector_of, api_key="the right key") as server:
        with embedding_indexes(server, tmp_path, "the right key") as indexes:
            async with anyio.create_task_group() as owner:
                keeper = IndexKeeper(indexes, lambda: owner)
                store = MemoryStore(roots, tmp_path / "cache", 16 * 1024, indexes=indexes)
                server.api_key = "another key"  # the provider refuses: said once in the log
                for attempt in (1, 2):
                    keeper.keep([root])
                    await finished.wait_for(root, attempt)
                warned = [r.getMessage() for r in caplog.records]
                assert len(warned) == 1 and "HTTP 401" in warned[0]
                pending = await anyio.to_thread.run_sync(indexes.pending_vectors, root, 10)
                assert len(pending) == 6  # no vector written for a failed batch
                server.api_key = "the right key"  # it answers again: the next pass embeds all
                keeper.keep([root])
                await finished.wait_for(root, 3)
                assert await anyio.to_thread.run_sync(indexes.pending_vectors, root, 10) == []
                sent = len(server.inputs)
                # A hand edit, which no store reports: the next search sees it and asks the
                # keeper for that note's vector.
                (root / "n0002.md").write_text("The heron left the pond.")
                await anyio.to_thread.run_sync(store.search, "garden", "global", 3)
                await finished.wait_for(root, 4)
                embedded = [text for text in server.inputs[sent:] if text != "garden"]
                assert embedded == ["n0002\nn0002.md\nThe heron left the pond."]


async def test_opening_a_session_starts_building_both_roots_in_the_background(
    paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    global_root, project_root = paths.home / "memory", paths.cwd / "memory"
    write_many(global_root, 3)
    write_many(project_root, 3)
    asked: list[Path] = []
    real_keep = IndexKeeper.keep

    def keep(self: IndexKeeper, roots: Iterable[Path]) -> None:
        roots = list(roots)
        asked.extend(roots)
        real_keep(self, roots)

    monkeypatch.setattr(IndexKeeper, "keep", keep)
    finished = Finished(monkeypatch)
    for enable in (False, True):
        cfg = fake_config("http://127.0.0.1:9/v1")  # no model is called
        cfg.memory = MemoryConfig(enable=enable)
        async with turn_agent(cfg, paths) as (ed, agent):
            with anyio.fail_after(BOUND_S):
                await ed.start_session(paths.cwd)
            if not enable:
                assert asked == []  # memory off: nothing is built
                continue
            assert sorted(asked) == sorted([global_root, project_root])
            await finished.wait_for(global_root)
            await finished.wait_for(project_root)
            indexes = agent.runner.memory.indexes()
            assert indexes.ready(global_root) and indexes.ready(project_root)


async def test_a_session_whose_memory_option_is_switched_on_gets_its_roots_built(
    paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    global_root, project_root = paths.home / "memory", paths.cwd / "memory"
    write_many(global_root, 3)
    write_many(project_root, 3)
    asked: list[Path] = []
    real_keep = IndexKeeper.keep

    def keep(self: IndexKeeper, roots: Iterable[Path]) -> None:
        roots = list(roots)
        asked.extend(roots)
        real_keep(self, roots)

    monkeypatch.setattr(IndexKeeper, "keep", keep)
    cfg = Config()
    cfg.memory = MemoryConfig(enable=False)  # memory off but for this session's own switch
    async with turn_agent(cfg, paths) as (ed, _):
        sid = await ed.start_session(paths.cwd)
        assert asked == []
        await ed.conn.set_config_option(config_id="memory", session_id=sid, value=True)
        # Opened again: no turn, no search, only the session's opening asks for the build.
        await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
    assert set(asked) == {global_root, project_root}


async def test_a_note_the_store_saves_gets_its_vector_without_waiting_for_a_search(
    roots: Roots, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = roots.global_root
    write_many(root, 3)
    finished = Finished(monkeypatch)
    async with FakeEmbeddings(keyed({}, default=[1.0, 0.0])) as server:
        with embedding_indexes(server, tmp_path) as indexes:
            async with anyio.create_task_group() as owner:
                keeper = IndexKeeper(indexes, lambda: owner)
                store = MemoryStore(roots, tmp_path / "cache", 16 * 1024, indexes=indexes)
                keeper.keep([root])
                await finished.wait_for(root, 1)
                sent = len(server.inputs)
                # As the memory tools call it: from a worker thread, and no search after it.
                await anyio.to_thread.run_sync(
                    store.save, "Kingfisher", "A kingfisher came to the pond.", "global")
                await finished.wait_for(root, 2)
                assert server.inputs[sent:] == [
                    "kingfisher\nkingfisher.md\nA kingfisher came to the pond."
                ]


async def test_a_build_that_fails_is_one_warning_line_and_searches_still_answer(
    roots: Roots, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    root = roots.global_root
    write_many(root, 3)
    finished = Finished(monkeypatch)

    def full_disk(*args: object) -> bool:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(SearchIndexes, "build", full_disk)
    caplog.set_level(logging.WARNING, "acp_memory.memory.index.keeper")
    with SearchIndexes(tmp_path / "cache") as indexes:
        async with anyio.create_task_group() as owner:
            IndexKeeper(indexes, lambda: owner).keep([root])
            await finished.wait_for(root)
            store = MemoryStore(roots, tmp_path / "cache", 16 * 1024, indexes=indexes)
            hits = await anyio.to_thread.run_sync(store.search, "number 1", "global", 3)
            await finished.wait_for(root, 2)  # the search asked again
    assert hits.partial and hits  # scanned, not lost
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING][:1]
    assert "cannot bring it up to date" in record.getMessage()
    assert "No space left on device" in record.getMessage() and record.exc_info is None
