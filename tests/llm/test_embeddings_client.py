"""The embeddings client: what it posts to {api_base}/embeddings, and the one line each
failure becomes (a search then answers by words alone)."""

from __future__ import annotations

import json
from typing import Any, Literal

import anyio
import pytest
from fakes.embeddings_server import FakeEmbeddings
from fakes.httpserver import Recorded
from fakes.script import Reply, endless, error, page, stall, verbatim_answer

from acp_memory.config import Config
from acp_memory.config.models import EmbeddingsConfig, MemoryConfig, ProviderConfig
from acp_memory.llm.embeddings import Embeddings, EmbeddingsUnavailable, embeddings_for

pytestmark = pytest.mark.anyio

KEY = "sk-embed-client-key"


def config(api_base: str = "", *, provider_type: Literal["openai", "anthropic"] = "openai",
           api_key: str = KEY, model: str = "emb/text-embed", **settings: Any) -> Config:
    provider = ProviderConfig(name="emb", type=provider_type, api_base=api_base, api_key=api_key)
    return Config(providers=[provider],
                  memory=MemoryConfig(embeddings=EmbeddingsConfig(model=model, **settings)))


def client(cfg: Config) -> Embeddings:
    found = embeddings_for(cfg)
    assert found is not None
    return found


def test_an_empty_model_means_no_embeddings() -> None:
    assert embeddings_for(Config()) is None


def test_the_official_api_is_the_default_base_and_the_key_names_model_and_dimensions() -> None:
    plain = client(config())
    assert plain.url == "https://api.openai.com/v1/embeddings" and plain.key == "emb/text-embed"
    assert client(config(dimensions=256)).key == "emb/text-embed@256"


@pytest.mark.parametrize(
    ("cfg", "reason"),
    [
        (config(model="nowhere/m"), "names provider 'nowhere', which is not configured"),
        (config("http://127.0.0.1:9", provider_type="anthropic"),
         "provider 'emb' is of type anthropic, which serves no /embeddings"),
        (config(api_key=""), "no API key for provider 'emb': set providers[].api_key or "
                             "EMB_API_KEY"),
    ],
)
async def test_a_model_that_cannot_work_fails_every_call_with_its_reason(
    cfg: Config, reason: str
) -> None:
    embeddings = client(cfg)
    with pytest.raises(EmbeddingsUnavailable, match=reason.replace("[", r"\[")):
        embeddings.embed_query("anything")
    with pytest.raises(EmbeddingsUnavailable, match=reason.replace("[", r"\[")):
        await embeddings.embed_batch(["anything"])


async def test_a_batch_posts_the_upstream_model_and_reads_vectors_by_index() -> None:
    def reversed_rows(request: Recorded) -> Reply:
        texts = request.json["input"]
        rows = [{"index": i, "embedding": [float(i + 1), 1.0]} for i in range(len(texts))]
        return verbatim_answer({"data": rows[::-1]})

    async with FakeEmbeddings(lambda text: [1.0], reversed_rows, api_key=KEY) as server:
        embeddings = client(config(server.base_url))
        with anyio.fail_after(10):
            vectors = await embeddings.embed_batch(["one", "two", "three"])
        assert vectors == [[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]]
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/embeddings")
    assert request.json == {"model": "text-embed", "input": ["one", "two", "three"]}
    assert request.headers["authorization"] == f"Bearer {KEY}"


def nan_answer(request: Recorded) -> Reply:
    return Reply(raw_body=json.dumps({"data": [{"index": 0, "embedding": [float("nan")]}]})
                 .encode())


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (error(403, "forbidden"), "answered HTTP 403: not authorised"),
        (error(429, "slow down"), "answered HTTP 429$"),
        (page(502, "<html>bad gateway</html>"), "answered HTTP 502$"),
        (verbatim_answer({"data": "nothing"}), "answered something other than embeddings"),
        (verbatim_answer({"data": []}), "answered 0 vectors for 1 texts"),
        (verbatim_answer({"data": [{"index": 0, "embedding": [0.0, 0.0]}]}),
         "a vector that is zero or not finite"),
        (nan_answer, "a vector that is zero or not finite"),
    ],
)
async def test_a_bad_answer_is_one_clear_reason(reply: Any, reason: str) -> None:
    async with FakeEmbeddings(lambda text: [1.0], reply, api_key=KEY) as server:
        embeddings = client(config(server.base_url))
        with anyio.fail_after(10), pytest.raises(EmbeddingsUnavailable, match=reason) as caught:
            await embeddings.embed_batch(["a note"])
    assert str(caught.value).startswith(f"{server.base_url}/embeddings ")


async def test_a_query_gives_up_after_timeout_ms() -> None:
    release = anyio.Event()
    async with FakeEmbeddings(lambda text: [1.0], stall(release, before_headers=True),
                              api_key=KEY) as server:
        embeddings = client(config(server.base_url, timeout_ms=150))
        try:
            with anyio.fail_after(10), pytest.raises(EmbeddingsUnavailable) as caught:
                await anyio.to_thread.run_sync(embeddings.embed_query, "a question")
        finally:
            release.set()
    assert str(caught.value) == f"{server.base_url}/embeddings gave no answer within 150 ms"


async def test_a_dripping_provider_is_given_up_on_once_the_whole_request_took_timeout_ms() -> None:
    # A byte every 50 ms never lets a read time out: only a bound on the whole request ends it.
    async with FakeEmbeddings(lambda text: [1.0], endless(b" ", every=0.05),
                              endless(b" ", every=0.05), api_key=KEY) as server:
        embeddings = client(config(server.base_url, timeout_ms=1000, batch_timeout_ms=1000))
        with anyio.fail_after(30), pytest.raises(EmbeddingsUnavailable) as query:
            # Abandoned on a timeout, so that a query that never ends fails the test.
            await anyio.to_thread.run_sync(embeddings.embed_query, "a question",
                                           abandon_on_cancel=True)
        with anyio.fail_after(30), pytest.raises(EmbeddingsUnavailable) as batch:
            await embeddings.embed_batch(["a note"])
    assert str(query.value) == f"{server.base_url}/embeddings gave no answer within 1000 ms"
    assert str(batch.value) == f"{server.base_url}/embeddings gave no answer within 1000 ms"


async def test_an_answer_past_its_bound_is_refused_before_it_is_whole() -> None:
    # The body never ends: reading it whole first would never return.
    async with FakeEmbeddings(lambda text: [1.0], endless(b"[1.0," * 13107),
                              api_key=KEY) as server:
        embeddings = client(config(server.base_url, batch_timeout_ms=600_000))
        with anyio.fail_after(20), pytest.raises(EmbeddingsUnavailable) as caught:
            await embeddings.embed_batch(["a note"])
    assert str(caught.value) == "answer over 32 MiB"


def test_the_bound_of_an_answer_is_a_whole_batch_of_vectors_and_at_least_32_mib() -> None:
    mib = 1024 * 1024
    assert client(config()).max_answer_bytes == 32 * mib  # 64 × 3072 × 24 is less
    assert client(config(batch=2048)).max_answer_bytes == 2048 * 3072 * 24
    assert client(config(batch=2048, dimensions=256)).max_answer_bytes == 32 * mib
    assert client(config(batch=1024, dimensions=4096)).max_answer_bytes == 1024 * 4096 * 24
