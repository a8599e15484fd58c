"""Model ids to providers: upstream ids on the wire, keys from config or env, clear errors."""

from __future__ import annotations

import pytest
from fakes.anthropic_server import FakeAnthropic
from fakes.script import error, text
from fakes.streams import collect, text_of

from acp_memory.config.models import (
    AgentConfig,
    Config,
    ModelConfig,
    ProviderConfig,
)
from acp_memory.llm.offline.provider import OfflineProvider
from acp_memory.llm.registry import ProviderHub, UnknownModelError, api_key, build_provider
from acp_memory.llm.resilient import ResilientProvider
from acp_memory.llm.types import ChatRequest, LLMError, Message

pytestmark = pytest.mark.anyio
SECRET = "sk-very-secret-123"


def ask(model: str) -> ChatRequest:
    return ChatRequest(model, [Message("user", "x")])


def config(*providers: ProviderConfig, **agent: object) -> Config:
    return Config(
        providers=list(providers),
        models=[ModelConfig(model="local/org/tiny-model:q4", max_tokens=99, temperature=0.3)],
        agent=AgentConfig(**agent),  # type: ignore[arg-type]
    )


async def test_the_upstream_id_and_model_settings_go_on_the_wire(openai_server, client):
    cfg = config(ProviderConfig(name="local", type="openai", api_base=openai_server.base_url))
    openai_server.script(text("hi"))
    async with ProviderHub(cfg, client) as hub:
        model = hub.model("local/org/tiny-model:q4")
        events = await collect(model.stream(model.request([Message("user", "x")])))
    assert text_of(events) == "hi"
    sent = openai_server.requests[0].json
    assert sent["model"] == "org/tiny-model:q4"
    assert sent["max_tokens"] == 99 and sent["temperature"] == 0.3
    assert "authorization" not in openai_server.requests[0].headers  # a local server needs none
    assert not client.is_closed  # the caller's client stays the caller's


async def test_the_hub_owns_a_client_when_given_none(anthropic_server: FakeAnthropic):
    cfg = config(ProviderConfig(name="local", type="anthropic", api_base=anthropic_server.base_url))
    anthropic_server.script(text("hello"))
    async with ProviderHub(cfg) as hub:
        model = hub.model("local/claude-x")
        assert (
            text_of(await collect(model.stream(model.request([Message("user", "x")])))) == "hello"
        )
        owned = hub.client
    assert owned.is_closed
    assert anthropic_server.requests[0].json["model"] == "claude-x"


def test_keys_come_from_config_then_provider_env_then_the_vendor_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "vendor")
    openai = ProviderConfig(name="my-router", type="openai")
    assert api_key(openai) == "vendor"
    monkeypatch.setenv("MY_ROUTER_API_KEY", "named")
    assert api_key(openai) == "named"
    assert api_key(ProviderConfig(name="my-router", type="openai", api_key="inline")) == "inline"
    assert api_key(ProviderConfig(name="box", type="anthropic")) == ""


async def test_a_key_from_env_is_sent_and_never_echoed_in_errors(
    openai_server, client, monkeypatch
):
    monkeypatch.setenv("LOCAL_API_KEY", SECRET)
    cfg = config(ProviderConfig(name="local", type="openai", api_base=openai_server.base_url))
    openai_server.script(error(401, f"Incorrect API key provided: {SECRET}"))
    provider = build_provider(cfg, "local/m", client)
    with pytest.raises(LLMError) as caught:
        await collect(provider.stream(ask("m")))
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in str(caught.value) and "[redacted]" in str(caught.value)
    assert SECRET not in repr(provider) and SECRET not in repr(cfg)


async def test_an_official_api_without_a_key_fails_before_any_request(client, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("CLAUDE_API_KEY", raising=False)
    provider = build_provider(
        config(ProviderConfig(name="claude", type="anthropic")), "claude/x", client
    )
    with pytest.raises(LLMError) as caught:
        await collect(provider.stream(ask("x")))
    assert "CLAUDE_API_KEY" in str(caught.value) and not caught.value.after_output


async def test_offline_models_need_no_provider_entry(client):
    assert isinstance(build_provider(Config(), "offline/default", client), OfflineProvider)
    cfg = config(ProviderConfig(name="dev", type="offline"))
    assert isinstance(build_provider(cfg, "dev/anything", client), OfflineProvider)


async def test_an_unconfigured_provider_is_a_clear_error(client):
    cfg = config(ProviderConfig(name="local", type="openai"))
    with pytest.raises(UnknownModelError, match=r"'nope'.*not configured.*local"):
        build_provider(cfg, "nope/model", client)
    with pytest.raises(UnknownModelError, match=r"<provider>/<upstream model id>"):
        build_provider(cfg, "just-a-name", client)


async def test_child_sessions_can_refuse_to_wait_for_limit_resets(client):
    cfg = config(
        ProviderConfig(name="local", type="openai", api_key="k"),
        wait_for_limit_reset=True,
        llm_retry_max=5,
    )
    top = build_provider(cfg, "local/m", client)
    child = build_provider(cfg, "local/m", client, wait_for_limit_reset=False)
    assert isinstance(top, ResilientProvider) and isinstance(child, ResilientProvider)
    assert top.policy.wait_for_limit_reset and not child.policy.wait_for_limit_reset
    assert top.policy.max_retries == 5


def test_a_hub_without_a_client_says_so_for_a_network_model():
    cfg = Config(providers=[ProviderConfig(name="p", type="openai", api_base="http://127.0.0.1:9")])
    with pytest.raises(RuntimeError, match="async with"):
        ProviderHub(cfg).provider("p/m")


def test_the_offline_model_needs_no_http_client():
    assert ProviderHub(Config()).provider("offline/default").name == "offline"


async def test_every_call_for_a_model_shares_one_provider_until_the_config_changes(client):
    cfg = config(ProviderConfig(name="local", type="openai", api_key="k"), llm_retry_max=5)
    async with ProviderHub(cfg, client) as hub:
        first = hub.model("local/m")
        assert hub.model("local/m").provider is first.provider  # the next turn's
        child = hub.model("local/m", wait_for_limit_reset=False)
        assert child.provider is not first.provider
        assert hub.model("local/m", wait_for_limit_reset=False).provider is child.provider
        cfg.agent = cfg.agent.model_copy(update={"llm_retry_max": 1})  # a config applied
        changed = hub.model("local/m").provider
        assert changed is not first.provider
        assert isinstance(changed, ResilientProvider) and changed.policy.max_retries == 1
        cfg.models = [ModelConfig(model="local/m", max_tokens=7)]
        assert hub.model("local/m").config.max_tokens == 7
