"""Embeddings from a provider's OpenAI-compatible `POST {api_base}/embeddings`.

`memory.embeddings.model` names `<provider>/<model id>`. A query is embedded in the searching
thread within `timeout_ms`; notes in batches in the background, each within `batch_timeout_ms`.
Every failure is an `EmbeddingsUnavailable` whose message is the one line a search reports.
"""

from __future__ import annotations

import math
import threading
from typing import Any, NoReturn

import httpx

from acp_memory.config import Config
from acp_memory.config.models import EmbeddingsConfig
from acp_memory.llm.openai import DEFAULT_API_BASE
from acp_memory.llm.registry import UnknownModelError, api_key, key_variable, resolve_provider

Vector = list[float]


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
        self._client: httpx.Client | None = None
        self._making = threading.Lock()

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

    def embed_query(self, text: str) -> Vector:
        """The vector of one query, within timeout_ms (blocking: call it off the event loop)."""
        self._refuse_if_impossible()
        timeout = self.settings.timeout_ms / 1000
        with self._making:  # two searching threads share one client (and its connections)
            if self._client is None:
                self._client = httpx.Client(timeout=timeout)
        try:
            response = self._client.post(
                self.url, json=self._body([text]), headers=self._headers, timeout=timeout
            )
        except httpx.HTTPError as exc:
            raise self._unreachable(exc, self.settings.timeout_ms) from None
        return self._vectors(response, 1)[0]

    async def embed_batch(self, texts: list[str]) -> list[Vector]:
        """The vectors of a batch of note texts, within batch_timeout_ms."""
        self._refuse_if_impossible()
        timeout = self.settings.batch_timeout_ms / 1000
        try:
            async with httpx.AsyncClient(timeout=timeout) as client:
                response = await client.post(
                    self.url, json=self._body(texts), headers=self._headers
                )
        except httpx.HTTPError as exc:
            raise self._unreachable(exc, self.settings.batch_timeout_ms) from None
        return self._vectors(response, len(texts))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _refuse_if_impossible(self) -> None:
        if self._problem:
            raise EmbeddingsUnavailable(self._problem)

    def _body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._upstream, "input": [self.prepare(t) for t in texts]}
        if self.settings.dimensions:
            body["dimensions"] = self.settings.dimensions
        return body

    def _unreachable(self, exc: httpx.HTTPError, timeout_ms: int) -> EmbeddingsUnavailable:
        if isinstance(exc, httpx.TimeoutException):
            return EmbeddingsUnavailable(f"{self.url} gave no answer within {timeout_ms} ms")
        return EmbeddingsUnavailable(f"cannot reach {self.url}")

    def _vectors(self, response: httpx.Response, count: int) -> list[Vector]:
        if response.status_code in (401, 403):
            self._fail(f"{self.url} answered HTTP {response.status_code}: not authorised "
                              "(check the provider's api_key)")
        if response.status_code != 200:
            self._fail(f"{self.url} answered HTTP {response.status_code}")
        try:
            data = response.json()["data"]
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
    base = (provider.api_base or DEFAULT_API_BASE).rstrip("/")
    return Embeddings(settings, url=f"{base}/embeddings", upstream=upstream, api_key=key)
