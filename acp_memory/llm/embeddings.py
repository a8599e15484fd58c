"""Embeddings from a provider's OpenAI-compatible `POST {api_base}/embeddings`.

`memory.embeddings.model` names `<provider>/<model id>`. A query is embedded in the searching
thread within `timeout_ms`; notes in batches in the background, each within `batch_timeout_ms`;
each bound holds for the whole request, and an answer is read at most `max_answer_bytes` long.
Every failure is an `EmbeddingsUnavailable` whose message is the one line a search reports.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, NoReturn

import anyio

from acp_memory.config import Config
from acp_memory.config.models import EmbeddingsConfig
from acp_memory.llm.registry import UnknownModelError, api_key, key_variable, resolve_provider

if TYPE_CHECKING:
    import httpx

Vector = list[float]
MIB = 1024 * 1024
MIN_ANSWER_BYTES = 32 * MIB
# Without memory.embeddings.dimensions, the widest vectors a common model makes
# (text-embedding-3-large); each number takes at most 24 bytes of JSON text.
MAX_DIMENSIONS = 3072
BYTES_PER_NUMBER = 24
CLOSE_GRACE_S = 1.0  # closing an answer cut short


class EmbeddingsUnavailable(Exception):
    """The provider gave no usable vectors; the message says why, in a few words."""


class Embeddings:
    """One configured embeddings model: `key` names its vectors (model and dimensions)."""

    def __init__(
        self,
        settings: EmbeddingsConfig,
        *,
        url: str = "",
        upstream: str = "",
        api_key: str = "",
        problem: str = "",
    ) -> None:
        self.settings = settings
        self.key = settings.model + (f"@{settings.dimensions}" if settings.dimensions else "")
        self.url = url
        self._upstream = upstream
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._problem = problem  # set when no request can succeed (an unknown provider, ...)

    @property
    def batch(self) -> int:
        return self.settings.batch

    @property
    def problem(self) -> str:
        """Why no request can succeed (the config names no usable provider), else ""."""
        return self._problem

    def prepare(self, text: str) -> str:
        """A text cut at the model's input limit."""
        return text[: self.settings.max_input_chars]

    @property
    def max_answer_bytes(self) -> int:
        """The largest answer read: room for a whole batch of the widest vectors as JSON text
        (24 bytes a number), at least 32 MiB; past it the answer is refused as it streams in."""
        widest = self.settings.dimensions or MAX_DIMENSIONS
        return max(MIN_ANSWER_BYTES, self.settings.batch * widest * BYTES_PER_NUMBER)

    def embed_query(self, text: str) -> Vector:
        """The vector of one query, within timeout_ms (blocking: call it off the event loop).

        It runs an event loop of its own, so that timeout_ms bounds the whole request as a
        batch's bound does, not each read of it."""
        self._refuse_if_impossible()
        return anyio.run(self._embed, [text], self.settings.timeout_ms)[0]

    async def embed_batch(self, texts: list[str]) -> list[Vector]:
        """The vectors of a batch of note texts, within batch_timeout_ms."""
        self._refuse_if_impossible()
        return await self._embed(texts, self.settings.batch_timeout_ms)

    async def _embed(self, texts: list[str], timeout_ms: int) -> list[Vector]:
        """One request, bounded as a whole by timeout_ms: a provider dripping its answer byte
        by byte never resets the clock, as httpx's per-read timeouts would."""
        import httpx  # the HTTP stack loads with the first request, not with the index

        # The client is closed outside the bound, so that a timeout still closes it whole.
        async with httpx.AsyncClient(timeout=None) as client:
            try:
                with anyio.fail_after(timeout_ms / 1000):
                    status, body = await self._post(client, texts)
            except TimeoutError:
                raise EmbeddingsUnavailable(
                    f"{self.url} gave no answer within {timeout_ms} ms") from None
            except httpx.HTTPError:
                raise EmbeddingsUnavailable(f"cannot reach {self.url}") from None
        return self._vectors(status, body, len(texts))

    async def _post(self, client: httpx.AsyncClient, texts: list[str]) -> tuple[int, bytes]:
        """The answer's status and body, read as a stream: a body past max_answer_bytes is
        refused before it is whole (an endless or huge one would fill the memory)."""
        limit = self.max_answer_bytes
        over = EmbeddingsUnavailable(f"answer over {math.ceil(limit / MIB)} MiB")
        request = client.build_request("POST", self.url, json=self._body(texts),
                                       headers=self._headers)
        response = await client.send(request, stream=True)
        try:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise over
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    raise over
            return response.status_code, bytes(body)
        finally:
            # Shielded: a request cut by its bound still drops its connection at once.
            with anyio.move_on_after(CLOSE_GRACE_S, shield=True):
                await response.aclose()

    def _refuse_if_impossible(self) -> None:
        if self._problem:
            raise EmbeddingsUnavailable(self._problem)

    def _body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._upstream, "input": [self.prepare(t) for t in texts]}
        if self.settings.dimensions:
            body["dimensions"] = self.settings.dimensions
        return body

    def _vectors(self, status: int, body: bytes, count: int) -> list[Vector]:
        if status in (401, 403):
            self._fail(f"{self.url} answered HTTP {status}: not authorised "
                       "(check the provider's api_key)")
        if status != 200:
            self._fail(f"{self.url} answered HTTP {status}")
        try:
            data = json.loads(body)["data"]
            rows = sorted(data, key=lambda row: row.get("index", 0))
            vectors = [[float(x) for x in row["embedding"]] for row in rows]
        except (ValueError, KeyError, TypeError, AttributeError):
            self._fail(f"{self.url} answered something other than embeddings")
        if len(vectors) != count:
            self._fail(f"{self.url} answered {len(vectors)} vectors for {count} texts")
        wanted = (self.settings.dimensions or len(vectors[0])) if vectors else 0
        for vector in vectors:
            if len(vector) != wanted:
                self._fail(f"{self.url} answered a vector of {len(vector)} dimensions, "
                                  f"not {wanted}")
            if not all(map(math.isfinite, vector)) or not any(vector):
                self._fail(f"{self.url} answered a vector that is zero or not finite")
        return vectors

    @staticmethod
    def _fail(reason: str) -> NoReturn:
        raise EmbeddingsUnavailable(reason)


def embeddings_for(cfg: Config) -> Embeddings | None:
    """The configured embeddings model, None when memory.embeddings.model is empty; a model
    that cannot work (an unknown provider, one with no /embeddings) fails every call."""
    settings = cfg.memory.embeddings
    if not settings.model:
        return None
    try:
        provider = resolve_provider(cfg, settings.model)
    except UnknownModelError as exc:
        return Embeddings(settings, problem=str(exc))
    upstream = settings.model.split("/", 1)[1]
    if provider.type != "openai":
        return Embeddings(settings, problem=f"provider {provider.name!r} is of type "
                          f"{provider.type}, which serves no /embeddings")
    key = api_key(provider)
    if not key and not provider.api_base:
        return Embeddings(settings, problem=f"no API key for provider {provider.name!r}: set "
                          f"providers[].api_key or {key_variable(provider)}")
    from acp_memory.llm.openai import DEFAULT_API_BASE  # it brings httpx

    base = (provider.api_base or DEFAULT_API_BASE).rstrip("/")
    return Embeddings(settings, url=f"{base}/embeddings", upstream=upstream, api_key=key)
