"""Providers for model ids: `<provider>/<upstream id>` resolved against the config."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Literal

from acp_memory.config.models import Config, ModelConfig, ProviderConfig
from acp_memory.llm.offline.provider import OfflineProvider
from acp_memory.llm.provider import Provider
from acp_memory.llm.types import ChatRequest, LLMError, Message, StreamEvent, ToolSpec

if TYPE_CHECKING:
    import httpx

_OFFICIAL_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}


class UnknownModelError(ValueError):
    """A model id whose provider is not configured."""


@dataclass
class ModelHandle:
    """A model ready to call: its provider (retries and timeouts included) and its settings."""

    model_id: str
    provider: Provider
    config: ModelConfig = field(repr=False)

    def request(
        self,
        messages: list[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        tool_choice: Literal["auto", "none", "required"] | None = None,
        cache_prefix_len: int = 0,
    ) -> ChatRequest:
        """A ChatRequest carrying this model's upstream id, max_tokens, temperature and stream."""
        return ChatRequest(
            model=self.config.upstream_id,
            messages=messages,
            tools=list(tools),
            max_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
            tool_choice=tool_choice,
            stream=self.config.stream,
            cache_prefix_len=cache_prefix_len,
        )

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Shorthand for provider.stream(request)."""
        return self.provider.stream(request)


class ProviderHub:
    """Builds providers over one shared httpx client; `async with` it when it owns the client."""

    def __init__(self, config: Config, client: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self._client = client
        self._owned = client is None
        self._entered = False
        # Handles by (model id, wait_for_limit_reset), each beside the config sections it was
        # built from: providers keep no per-call state, so every turn and memory run of the
        # hub's life shares one; a section replaced since (the settings page) builds anew.
        self._handles: dict[tuple[str, bool | None], tuple[tuple[object, ...], ModelHandle]] = {}

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            if not self._entered:
                raise RuntimeError("ProviderHub has no client: pass one or use `async with`")
            # Made on first use, so that a run on the offline model never imports httpx
            # (a tenth of the cold start). Per-request timeouts come from timeout_ms.
            import httpx

            self._client = httpx.AsyncClient(timeout=None)
        return self._client

    async def __aenter__(self) -> ProviderHub:
        self._entered = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._entered = False
        if self._owned and self._client is not None:
            await self._client.aclose()
            self._client = None

    def model(self, model_id: str, *, wait_for_limit_reset: bool | None = None) -> ModelHandle:
        """The handle for a model id; child sessions pass wait_for_limit_reset=False."""
        cfg = self.config
        sources = (cfg, cfg.agent, cfg.providers, cfg.models)
        key = (model_id, wait_for_limit_reset)
        known = self._handles.get(key)
        if known is not None and all(a is b for a, b in zip(known[0], sources, strict=True)):
            return known[1]
        handle = self._build(model_id, wait_for_limit_reset)
        self._handles[key] = (sources, handle)
        return handle

    def _build(self, model_id: str, wait_for_limit_reset: bool | None) -> ModelHandle:
        provider = self.provider(model_id, wait_for_limit_reset=wait_for_limit_reset)
        config = self.config.find_model(model_id)
        if isinstance(provider, OfflineProvider) and not config.vision:
            config = config.model_copy(update={"vision": True})  # it counts an image's bytes
        return ModelHandle(model_id, provider, config)

    def provider(self, model_id: str, *, wait_for_limit_reset: bool | None = None) -> Provider:
        """The provider serving a model id, wrapped in the agent's retry policy."""
        # The client is asked for only by a network provider, so the offline path makes none.
        return build_provider(
            self.config, model_id, lambda: self.client, wait_for_limit_reset=wait_for_limit_reset
        )


def build_provider(
    config: Config,
    model_id: str,
    client: httpx.AsyncClient | Callable[[], httpx.AsyncClient],
    *,
    wait_for_limit_reset: bool | None = None,
) -> Provider:
    """The provider for `<provider>/<upstream id>`, with agent.* retries and stream timeouts.

    `client` may be a callable that makes the shared client; it is called only when needed.
    """
    provider_config = resolve_provider(config, model_id)
    if provider_config.type == "offline":
        return OfflineProvider(delay_ms=provider_config.delay_ms)
    # Network providers bring httpx; importing them here keeps it off the offline path.
    from acp_memory.llm.anthropic import AnthropicProvider
    from acp_memory.llm.openai import OpenAIProvider
    from acp_memory.llm.resilient import ResilientProvider, RetryPolicy
    from acp_memory.llm.transport import StreamTimeouts

    agent = config.agent
    timeouts = StreamTimeouts.from_ms(
        agent.llm_first_token_timeout_ms, agent.llm_stream_idle_timeout_ms
    )
    cls = OpenAIProvider if provider_config.type == "openai" else AnthropicProvider
    key = api_key(provider_config)
    inner: Provider = cls(
        client() if callable(client) else client,
        name=provider_config.name,
        api_base=provider_config.api_base,
        api_key=key,
        timeout_s=provider_config.timeout_ms / 1000,
        timeouts=timeouts,
    )
    if not key and not provider_config.api_base:
        inner = _MissingKey(provider_config)
    policy = RetryPolicy.from_config(agent, wait_for_limit_reset=wait_for_limit_reset)
    return ResilientProvider(inner, policy)


def resolve_provider(config: Config, model_id: str) -> ProviderConfig:
    """The configured provider a model id names, or UnknownModelError."""
    name, slash, upstream = model_id.partition("/")
    if not slash or not name or not upstream:
        raise UnknownModelError(
            f"model id {model_id!r} is not of the form <provider>/<upstream model id>"
        )
    found = config.find_provider(name)
    if found is None:
        known = ", ".join(p.name for p in config.providers) or "none"
        raise UnknownModelError(
            f"model {model_id!r} names provider {name!r}, which is not configured "
            f"(configured providers: {known}; the built-in one is 'offline')"
        )
    return found


def key_variable(provider: ProviderConfig) -> str:
    """The environment variable named after a provider: <NAME>_API_KEY."""
    return re.sub(r"[^A-Z0-9]", "_", provider.name.upper()) + "_API_KEY"


def api_key(provider: ProviderConfig) -> str:
    """The provider's key: its api_key, else <NAME>_API_KEY, else OPENAI_/ANTHROPIC_API_KEY."""
    if provider.api_key:
        return provider.api_key
    names = [key_variable(provider)]
    if provider.type in _OFFICIAL_HOSTS:
        names.append(f"{provider.type.upper()}_API_KEY")
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return ""


class _MissingKey:
    """Stands in for a provider of an official API with no key: every call fails at once."""

    def __init__(self, provider: ProviderConfig) -> None:
        self.name = provider.name
        self._env = key_variable(provider)
        self._host = _OFFICIAL_HOSTS.get(provider.type, "")

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        raise LLMError(
            f"no API key for {self._host}: set providers[].api_key or {self._env}",
            provider=self.name,
        )
        yield  # pragma: no cover - makes this an async generator
