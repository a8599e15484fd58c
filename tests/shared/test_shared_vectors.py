"""A shared root's note vectors: embedded once, by whichever process comes first, and taken
from the server's embeddings table by the others for the very same text."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from fakes.embeddings_server import FakeEmbeddings, keyed

from acp_memory.config import Config, resolve_paths
from acp_memory.config.models import (
    EmbeddingsConfig,
    MemoryConfig,
    ProviderConfig,
    SharedMemoryConfig,
)
from acp_memory.llm.embeddings import embeddings_for
from acp_memory.memory.index.indexes import SearchIndexes
from acp_memory.memory.index.keeper import embed_pending
from acp_memory.memory.shared.database import Database
from acp_memory.memory.shared.root import close_all
from acp_memory.memory.shared.vectors import share_vectors
from acp_memory.memory.store import MemoryStore

pytestmark = pytest.mark.anyio

KEY = "github.com/org/repo"
MEANING = keyed({"orchard": [1.0, 0.0, 0.0], "engine": [0.0, 1.0, 0.0]}, default=[0.0, 0.0, 1.0])


def config_for(api_base: str, dsn: str = "") -> Config:
    provider = ProviderConfig(name="emb", type="openai", api_base=api_base, api_key="k")
    return Config(providers=[provider],
                  memory=MemoryConfig(embeddings=EmbeddingsConfig(model="emb/test-embed"),
                                      shared=SharedMemoryConfig(dsn=dsn, project=KEY)))


def home(
    tmp_path: Path, name: str, cfg: Config, notes: dict[str, str]
) -> tuple[Path, SearchIndexes]:
    """One process's local copy of the key's notes and its own index cache."""
    root = tmp_path / name / "cache" / "shared" / "copy" / "notes"
    root.mkdir(parents=True)
    for rel, text in notes.items():
        (root / rel).write_text(text)
    return root, SearchIndexes(tmp_path / name / "cache" / "search", embeddings=embeddings_for(cfg))


async def embedded(indexes: SearchIndexes, root: Path) -> int:
    with anyio.fail_after(30):
        await anyio.to_thread.run_sync(indexes.build, root)
        return await embed_pending(indexes, root)


async def test_a_vector_one_home_embedded_is_taken_by_another_homes_keeper(
    tmp_path: Path, pg_dsn: str
) -> None:
    notes = {"fruit.md": "# Fruit\nThe orchard grows mangoes.",
             "cars.md": "# Cars\nChange the engine oil."}
    database = Database(pg_dsn)
    try:
        async with FakeEmbeddings(MEANING) as server:
            cfg = config_for(server.base_url)
            root_a, indexes_a = home(tmp_path, "a", cfg, notes)
            root_b, indexes_b = home(tmp_path, "b", cfg, {**notes, "cars.md": "# Cars\nNew tyres."})
            with indexes_a, indexes_b:
                share_vectors(indexes_a, root_a, database, KEY)
                share_vectors(indexes_b, root_b, database, KEY)
                assert await embedded(indexes_a, root_a) == 2
                assert len(server.inputs) == 2
                # b holds the same fruit note and another text of cars.md: only that is embedded.
                assert await embedded(indexes_b, root_b) == 2
                assert len(server.inputs) == 3 and "New tyres." in server.inputs[-1]
                assert indexes_b.pending_vectors(root_b, 10) == []
                nearest = indexes_b.nearest(root_b, [1.0, 0.0, 0.0], 1)
                assert nearest[0][0] == "fruit.md" and nearest[0][1] == pytest.approx(1.0)
    finally:
        database.close()


async def test_a_server_that_cannot_be_reached_leaves_the_keeper_embedding_locally(
    tmp_path: Path
) -> None:
    database = Database("postgresql://nobody@/nowhere?host=/nonexistent-socket-folder")
    async with FakeEmbeddings(MEANING) as server:
        root, indexes = home(tmp_path, "a", config_for(server.base_url),
                             {"fruit.md": "# Fruit\nThe orchard grows mangoes."})
        with indexes:
            share_vectors(indexes, root, database, KEY)
            assert await embedded(indexes, root) == 1
            assert len(server.inputs) == 1
    database.close()


async def test_every_store_on_a_shared_root_shares_its_vectors_as_notes_index_does(
    tmp_path: Path, pg_dsn: str
) -> None:
    # No runner here: the store `notes index` and HTTP build registers the share itself.
    async with FakeEmbeddings(MEANING) as server:
        cfg = config_for(server.base_url, pg_dsn)
        stores = []
        for name in ("a", "b"):
            (tmp_path / name / "clone").mkdir(parents=True)
            stores.append(MemoryStore.from_config(cfg, resolve_paths(
                home=str(tmp_path / name / "home"), cwd=str(tmp_path / name / "clone"))))
        a, b = stores
        try:
            a.write("project:fruit.md", "# Fruit\nThe orchard grows mangoes.")
            b.read("project:fruit.md")  # b's copy catches up
            for store in stores:
                root = store.roots.project_root
                assert root is not None
                assert await embedded(store.indexes, root) == 1
            assert len(server.inputs) == 1  # b took a's vector from the server
        finally:
            for store in stores:
                store.close()
            close_all()
