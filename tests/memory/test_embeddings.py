"""Recall by meaning: note vectors from a fake /v1/embeddings, fused with the word rankings.

Searches run in a worker thread (as the tools and routes run them): the query's embedding is
a blocking request, and the fake server answers from this test's event loop.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakes.embeddings_server import FakeEmbeddings, VectorOf, keyed, unreachable_url
from fakes.httpserver import Scripted
from fakes.script import error, stall

from acp_memory.config import Config, Paths
from acp_memory.config.models import EmbeddingsConfig, MemoryConfig, ProviderConfig
from acp_memory.llm.embeddings import EmbeddingsUnavailable
from acp_memory.memory.index.keeper import embed_pending
from acp_memory.memory.index.query import TIERS
from acp_memory.memory.search import Hits, fuse
from acp_memory.memory.store import MemoryStore
from acp_memory.memory.tools import memory_tools
from acp_memory.text.analyze import parse_query
from acp_memory.tools.base import ToolContext

pytestmark = pytest.mark.anyio

KEY = "sk-embed-test-key"
MODEL = "emb/test-embed"
K = 60  # reciprocal rank fusion's constant, as the issue pins it
CTX = ToolContext(session_id="sess_test", cwd=Path("/"), mode="agent")

# The meaning corpus: "tropical" (a query word no note holds) lies nearest to "orchard".
MEANING = keyed(
    {"tropical": [0.9, 0.1, 0.0], "orchard": [1.0, 0.0, 0.0], "engine": [0.0, 1.0, 0.0]},
    default=[0.0, 0.0, 1.0],
)
NOTES = {
    "global:fruit.md": "# Fruit\nThe orchard grows mangoes.",
    "global:cars.md": "# Cars\nChange the engine oil every spring.",
    "project:tax.md": "# Tax\nInvoices are due in April.",
}


OpenStore = Callable[[Config], MemoryStore]


def config_for(api_base: str, model: str = MODEL, **settings: Any) -> Config:
    """A config whose embeddings come from the provider at api_base."""
    provider = ProviderConfig(name="emb", type="openai", api_base=api_base, api_key=KEY)
    embeddings = EmbeddingsConfig(model=model, **settings)
    return Config(providers=[provider], memory=MemoryConfig(embeddings=embeddings))


def write_notes(paths: Paths, notes: dict[str, str]) -> None:
    """Notes put on disk by hand (not through a store, which would redact them)."""
    for name, text in notes.items():
        scope, rel = name.split(":", 1)
        root = paths.home / "memory" if scope == "global" else paths.cwd / "memory"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.fixture
def open_store(paths: Paths) -> Iterator[OpenStore]:
    """open_store(cfg): a store of the test's roots with the embeddings cfg names."""
    opened: list[MemoryStore] = []

    def make(cfg: Config) -> MemoryStore:
        opened.append(MemoryStore.from_config(cfg, paths))
        return opened[-1]

    yield make
    for store in opened:
        store.close()


@pytest.fixture
async def server() -> AsyncIterator[FakeEmbeddings]:
    async with FakeEmbeddings(MEANING, api_key=KEY) as fake:
        yield fake


async def index_and_embed(store: MemoryStore) -> int:
    """Bring both roots' indexes up to date and embed what lacks a vector; how many got one."""
    done = 0
    with anyio.fail_after(10):
        for scope in store.roots.scopes():
            root = store.roots.root_of(scope)
            await anyio.to_thread.run_sync(store.indexes.build, root)
            done += await embed_pending(store.indexes, root)
    return done


async def search(store: MemoryStore, query: str, limit: int = 8) -> Hits:
    with anyio.fail_after(10):
        return await anyio.to_thread.run_sync(store.search, query, "both", limit)


def ranking(hits: Hits) -> list[tuple[str, float]]:
    return [(h.path, h.score) for h in hits]


async def test_a_note_sharing_no_word_with_the_query_is_found_by_its_vector(
    paths: Paths, server: FakeEmbeddings, open_store: OpenStore
) -> None:
    write_notes(paths, NOTES)
    words_only = open_store(Config())
    assert list(await search(words_only, "tropical produce")) == []
    store = open_store(config_for(server.base_url))
    assert await index_and_embed(store) == 3
    hits = await search(store, "tropical produce")
    assert hits[0].path == "global:fruit.md"
    assert "orchard" in hits[0].snippet


async def test_three_lists_fuse_by_reciprocal_rank_as_computed_by_hand(
    paths: Paths, server: FakeEmbeddings, open_store: OpenStore
) -> None:
    # "zebra query": only n1 holds a query word, so both word lists are [n1]; the query's
    # vector (marker "query") is nearest n2, then n3, then n1.
    server.vector_of = keyed(
        {"query": [0.8, 0.6, 0.0], "orchard": [1.0, 0.0, 0.0], "engine": [0.0, 1.0, 0.0]},
        default=[0.0, 0.0, 1.0],
    )
    write_notes(paths, {"global:n1.md": "zebra stripes", "global:n2.md": "an orchard",
                        "project:n3.md": "an engine"})
    store = open_store(config_for(server.base_url))
    await index_and_embed(store)
    hits = await search(store, "zebra query")
    assert ranking(hits) == [
        ("global:n1.md", round(1 / (K + 1) * 2 + 1 / (K + 3), 4)),
        ("global:n2.md", round(1 / (K + 1), 4)),
        ("project:n3.md", round(1 / (K + 2), 4)),
    ]
    assert hits.total == 3


def test_fusion_sums_reciprocal_ranks_and_breaks_ties_by_scope_and_path() -> None:
    g, p = Path("/g"), Path("/p")
    words = [("project", p, "a.md", 9.0), ("global", g, "b.md", 5.0), ("global", g, "c.md", 1.0)]
    broad = [("global", g, "b.md", 7.0), ("project", p, "a.md", 6.0)]
    near = [("global", g, "c.md", 0.9)]
    fused = fuse([words, broad, near])
    # a and b: 1/61 + 1/62 each, a tie that "global:b.md" < "project:a.md" breaks; c: 1/63 + 1/61.
    assert [(s, rel, score) for s, _, rel, score in fused] == [
        ("global", "b.md", 1 / 61 + 1 / 62),
        ("project", "a.md", 1 / 62 + 1 / 61),
        ("global", "c.md", 1 / 63 + 1 / 61),
    ]
    assert [root for _, root, _, _ in fused] == [g, p, g]


async def test_each_fused_list_is_taken_fifty_deep(
    paths: Paths, server: FakeEmbeddings, open_store: OpenStore
) -> None:
    def nearer_the_lower_the_number(text: str) -> Sequence[float]:
        found = re.search(r"item (\d+)", text)
        return [1.0, float(found.group(1)) if found else 0.0]

    server.vector_of = nearer_the_lower_the_number
    write_notes(paths, {f"global:n{i:02}.md": f"item {i}" for i in range(55)})
    store = open_store(config_for(server.base_url, min_similarity=-1))  # every note counts
    await index_and_embed(store)
    hits = await search(store, "meaning")  # no note holds the word: the vector list alone
    assert [h.path for h in hits] == [f"global:n{i:02}.md" for i in range(8)]
    assert hits.total == 50


async def test_a_note_found_by_its_vector_alone_counts_only_at_min_similarity(
    paths: Paths, server: FakeEmbeddings, open_store: OpenStore
) -> None:
    # Query vectors against fruit [1, 0, 0], cars [0, 1, 0] and tax [0, 0, 1]: "halfway"
    # lies at cosine 0.6 from fruit and 0.8 from cars, "zzzqqq" away from every note.
    server.vector_of = keyed(
        {"halfway": [0.6, 0.8, 0.0], "zzzqqq": [-1.0, -1.0, -1.0], "orchard": [1.0, 0.0, 0.0],
         "engine": [0.0, 1.0, 0.0]},
        default=[0.0, 0.0, 1.0],
    )
    write_notes(paths, NOTES)
    store = open_store(config_for(server.base_url, min_similarity=0.7))
    assert await index_and_embed(store) == 3
    assert list(await search(store, "zzzqqq xyzzy")) == []
    assert [h.path for h in await search(store, "halfway")] == ["global:cars.md"]
    # A note a word list holds keeps its place in the vector list however far it is: fruit
    # (0.6) and tax (0.0) are spared by the floor, cars (0.8) counts by its vector alone.
    ranked = ranking(await search(store, "halfway orchard invoices"))
    assert ranked == [
        ("global:fruit.md", round(1 / (K + 1) + 1 / (K + 1) + 1 / (K + 2), 4)),
        ("project:tax.md", round(1 / (K + 2) + 1 / (K + 2) + 1 / (K + 3), 4)),
        ("global:cars.md", round(1 / (K + 1), 4)),
    ]


async def test_embeddings_off_ranks_exactly_as_words_alone(
    paths: Paths, open_store: OpenStore
) -> None:
    write_notes(paths, {
        "global:exact.md": "Long text. " * 30 + "Remember VERIFIER_TOKEN.",
        "global:both.md": "the verifier checks a token",
        "project:both.md": "token token verifier, verifier",
        "global:one.md": "a token alone",
        "project:other.md": "verifier only, twice verifier",
        "global:none.md": "nothing to see",
    })
    store = open_store(config_for("", model=""))
    assert store.indexes.embeddings is None
    for query in ("VERIFIER_TOKEN", "verifier token", "token", "verifier alone"):
        assert ranking(await search(store, query)) == words_ranking(store, query), query


def words_ranking(store: MemoryStore, query: str, limit: int = 8) -> list[tuple[str, float]]:
    """The ranking before recall by meaning: tiers first, then BM25, scores lifted by tier."""
    found = []
    for scope in store.roots.scopes():
        root = store.roots.root_of(scope)
        found += [(scope, c) for c in store.indexes.candidates(root, parse_query(query), limit)]
    found.sort(key=lambda x: (x[1].tier, -x[1].score, x[0], x[1].rel))
    lift = max((c.score for _, c in found), default=0.0)
    return [(f"{scope}:{c.rel}", round(c.score + (TIERS - 1 - c.tier) * lift, 3))
            for scope, c in found[:limit]]


async def test_vectors_of_another_model_or_dimension_are_never_compared(
    paths: Paths, server: FakeEmbeddings, open_store: OpenStore
) -> None:
    write_notes(paths, NOTES)
    first = open_store(config_for(server.base_url, model="emb/model-a"))
    assert await index_and_embed(first) == 3
    others: list[dict[str, Any]] = [{"model": "emb/model-b"},
                                    {"model": "emb/model-a", "dimensions": 3}]
    for other in others:
        sent = len(server.requests)
        store = open_store(config_for(server.base_url, **other))
        # Model A's vectors lie there, but not under this key: the query finds nothing.
        hits = await search(store, "tropical produce")
        assert list(hits) == [] and not hits.unavailable
        assert server.requests[sent].json["input"] == ["tropical produce"]
        # This key's pass embeds every note again.
        assert await index_and_embed(store) == 3
        assert sorted(server.inputs[-3:]) == sorted(
            f"{text.splitlines()[0][2:]}\n{name.split(':')[1]}\n{text}"
            for name, text in NOTES.items()
        )
        assert {r.json["model"] for r in server.requests[sent + 1:]} == {
            other["model"].split("/")[1]
        }
        assert (await search(store, "tropical produce"))[0].path == "global:fruit.md"


@contextlib.asynccontextmanager
async def failing_provider(fault: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(api_base, extra embeddings settings) of a provider that is down, slow or refusing."""
    if fault == "down":
        yield unreachable_url(), {}
        return
    release = anyio.Event()
    slow = [stall(release, before_headers=True) for _ in range(4)]
    async with FakeEmbeddings(MEANING, *slow if fault == "slow" else (),
                              api_key="another key" if fault == "401" else KEY) as fake:
        try:
            yield fake.base_url, {"timeout_ms": 200} if fault == "slow" else {}
        finally:
            release.set()


REASONS = {
    "down": r"cannot reach http://127\.0\.0\.1:\d+/v1/embeddings",
    "slow": r"http://127\.0\.0\.1:\d+/v1/embeddings gave no answer within 200 ms",
    "401": r"http://127\.0\.0\.1:\d+/v1/embeddings answered HTTP 401: not authorised \(check "
           r"the provider's api_key\)",
}


@pytest.mark.parametrize("fault", ["down", "slow", "401"])
async def test_a_failing_provider_leaves_the_two_word_lists_fused_and_says_so_once(
    paths: Paths, open_store: OpenStore, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    # "alpha beta": only a.md holds both words (the word ranking), b.md one (broad BM25 too).
    write_notes(paths, {"global:a.md": "alpha beta", "global:b.md": "alpha", **NOTES})
    async with failing_provider(fault) as (api_base, settings):
        store = open_store(config_for(api_base, **settings))
        tools = {t.name: t for t in memory_tools(store, MemoryConfig(max_search_hits=8))}
        caplog.set_level(logging.WARNING, "acp_memory.memory.store")
        with anyio.fail_after(10):
            first = await tools["memory_search"].run({"query": "alpha beta"}, CTX)
        notice = first.text.splitlines()[0]
        assert re.fullmatch(rf"\(embeddings unavailable: {REASONS[fault]}; words only\)", notice)
        hits = await search(store, "alpha beta")
        assert ranking(hits) == [("global:a.md", round(2 / (K + 1), 4)),
                                 ("global:b.md", round(1 / (K + 2), 4))]
        assert hits.unavailable == ""  # said once per store
        with anyio.fail_after(10):
            again = await tools["memory_search"].run({"query": "alpha"}, CTX)
        assert not again.text.startswith("(") and "global:a.md" in again.text
        warned = [r.getMessage() for r in caplog.records
                  if "embeddings unavailable" in r.getMessage()]
        assert len(warned) == 1 and re.search(REASONS[fault], warned[0])


@pytest.mark.parametrize("fault", ["401", "500", "slow", "wrong dimensions"])
async def test_notes_whose_batch_failed_get_no_vector_and_are_embedded_once_it_answers(
    paths: Paths, server: FakeEmbeddings, open_store: OpenStore, fault: str
) -> None:
    write_notes(paths, NOTES)
    release = anyio.Event()
    faults: dict[str, Scripted] = {
        "401": error(401, "invalid key"),
        "500": error(500, "overloaded"),
        "slow": stall(release, before_headers=True),
        "wrong dimensions": server.answer(lambda text: [1.0, 0.0]),  # 2 numbers, not 3
    }
    server.script(faults[fault])
    store = open_store(config_for(server.base_url, batch_timeout_ms=200, dimensions=3))
    try:
        with pytest.raises(EmbeddingsUnavailable):
            await index_and_embed(store)
    finally:
        release.set()
    global_root = store.roots.root_of("global")
    pending = await anyio.to_thread.run_sync(store.indexes.pending_vectors, global_root, 10)
    assert sorted(rel for _, rel, _ in pending) == ["cars.md", "fruit.md"]
    assert (await search(store, "tropical produce")) == []  # no vector was written
    assert await index_and_embed(store) == 3
    assert (await search(store, "tropical produce"))[0].path == "global:fruit.md"


async def test_editing_one_note_re_embeds_that_note_alone(
    paths: Paths, server: FakeEmbeddings, open_store: OpenStore
) -> None:
    write_notes(paths, NOTES)
    store = open_store(config_for(server.base_url))
    assert await index_and_embed(store) == 3
    sent = len(server.inputs)
    store.save("Cars", "Check the tyres as well as the engine.", "global", "cars.md")
    assert await index_and_embed(store) == 1
    assert server.inputs[sent:] == [
        "cars\ncars.md\nCheck the tyres as well as the engine."
    ]
    sent = len(server.inputs)
    (paths.cwd / "memory" / "tax.md").write_text("# Tax\nThe orchard pays its taxes in May.")
    assert await index_and_embed(store) == 1
    assert server.inputs[sent:] == ["Tax\ntax.md\n# Tax\nThe orchard pays its taxes in May."]
    assert await index_and_embed(store) == 0
    assert len(server.inputs) == sent + 1
    near = [h.path for h in await search(store, "tropical produce")][:2]
    assert sorted(near) == ["global:fruit.md", "project:tax.md"]


SECRET = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1w"


async def test_note_text_is_redacted_cut_and_sent_with_the_configured_dimensions(
    paths: Paths, server: FakeEmbeddings, open_store: OpenStore
) -> None:
    write_notes(paths, {"global:keys.md": f"# Keys\nThe deploy key is {SECRET}.\n"
                        + "filler words " * 1000})
    store = open_store(config_for(server.base_url, dimensions=3, max_input_chars=300))
    assert await index_and_embed(store) == 1
    (request,) = server.requests
    assert SECRET not in request.body.decode() and "[REDACTED" in request.json["input"][0]
    assert len(request.json["input"][0]) == 300
    assert request.json["model"] == "test-embed" and request.json["dimensions"] == 3
    assert request.headers["authorization"] == f"Bearer {KEY}"
    await search(store, "where is the deploy key")
    assert server.requests[-1].json == {
        "model": "test-embed", "input": ["where is the deploy key"], "dimensions": 3
    }
    # A secret in a query never reaches the provider either.
    await search(store, f"deploy key {SECRET}")
    (query,) = server.requests[-1].json["input"]
    assert SECRET not in server.requests[-1].body.decode() and "[REDACTED" in query


async def test_dimensions_are_not_sent_unless_set(
    paths: Paths, server: FakeEmbeddings, open_store: OpenStore
) -> None:
    write_notes(paths, NOTES)
    await index_and_embed(open_store(config_for(server.base_url)))
    assert all("dimensions" not in r.json for r in server.requests)


@pytest.mark.parametrize(
    ("dimensions", "vector_of", "reason"),
    [
        (3, lambda text: [1.0, 0.0, 0.0, 0.0], "a vector of 4 dimensions, not 3"),
        (None, lambda text: [1.0] * (2 + ("orchard" in text)),
         r"a vector of \d dimensions, not \d"),
    ],
)
async def test_a_vector_of_another_length_is_refused(
    paths: Paths, server: FakeEmbeddings, open_store: OpenStore, dimensions: int | None,
    vector_of: VectorOf, reason: str,
) -> None:
    write_notes(paths, NOTES)
    server.vector_of = vector_of
    store = open_store(config_for(server.base_url, dimensions=dimensions, batch=8))
    with pytest.raises(EmbeddingsUnavailable, match=reason):
        await index_and_embed(store)
    root = store.roots.root_of("global")
    assert len(await anyio.to_thread.run_sync(store.indexes.pending_vectors, root, 10)) == 2
    if dimensions:
        hits = await search(store, "tropical produce")
        assert hits.unavailable.endswith(reason)
