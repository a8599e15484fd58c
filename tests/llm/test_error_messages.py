"""What a failed call says: which provider, model and URL, and a server's page only once."""

from __future__ import annotations

import logging
import socket

import anyio
import httpx
import pytest
from fakes.anthropic_server import FakeAnthropic
from fakes.httpserver import FakeModelServer
from fakes.openai_server import FakeOpenAI
from fakes.script import error, page
from fakes.streams import RecordingSleep, collect

from acp_memory.llm.anthropic import AnthropicProvider
from acp_memory.llm.openai import OpenAIProvider
from acp_memory.llm.resilient import ResilientProvider, RetryPolicy
from acp_memory.llm.types import ChatRequest, LLMError, Message

pytestmark = pytest.mark.anyio

REQUEST = ChatRequest("m", [Message("user", "hi")])
NO_JITTER = RetryPolicy(max_retries=3, base_delay=0.1, jitter=0)

# nginx's own page: its first line alone is all a message can carry.
NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n"
    "</body>\r\n</html>\r\n"
)
# A minified page: one long line.
MINIFIED = "<!doctype html><html><head><title>Oops</title></head><body>" + "x" * 1000 + "</html>"


@pytest.fixture(params=["openai", "anthropic"])
async def server(request: pytest.FixtureRequest):
    fake = FakeOpenAI() if request.param == "openai" else FakeAnthropic()
    async with fake:
        yield fake


def free_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def resilient(
    kind: type[OpenAIProvider] | type[AnthropicProvider], base: str, client: httpx.AsyncClient
) -> ResilientProvider:
    inner = kind(client, name="local", api_base=base, api_key="sk-secret-key")
    return ResilientProvider(inner, NO_JITTER, sleep=RecordingSleep())


def kind_of(server: FakeModelServer) -> type[OpenAIProvider] | type[AnthropicProvider]:
    return OpenAIProvider if isinstance(server, FakeOpenAI) else AnthropicProvider


async def failure(provider: ResilientProvider, request: ChatRequest = REQUEST) -> LLMError:
    with anyio.fail_after(5), pytest.raises(LLMError) as caught:
        await collect(provider.stream(request))
    return caught.value


@pytest.mark.parametrize(
    ("kind", "base", "path"),
    [
        (OpenAIProvider, "http://127.0.0.1:{port}/v1", "/v1/chat/completions"),
        (AnthropicProvider, "http://127.0.0.1:{port}", "/v1/messages"),
    ],
)
async def test_an_unreachable_provider_is_named_with_its_model_and_url(client, kind, base, path):
    port = free_port()
    err = await failure(resilient(kind, base.format(port=port), client))
    assert err.provider == "local" and err.model == "m" and err.status is None
    assert str(err).startswith("local: connection failed: ")
    assert str(err).endswith(f" (model m at http://127.0.0.1:{port}{path}, before any output)")


@pytest.mark.parametrize(
    ("body", "shown"),
    [(NGINX_502, "<html>"), (MINIFIED, MINIFIED[:200] + "…")],
    ids=["first-line", "200-characters"],
)
async def test_an_error_page_is_cut_and_printed_once_not_in_every_retry_line(
    server, client, caplog, body, shown
):
    server.script(*[page(502, body)] * 4)
    provider = resilient(kind_of(server), server.base_url, client)
    with caplog.at_level(logging.INFO, "acp_memory.llm"):
        err = await failure(provider)
    assert len(server.requests) == 4
    assert str(err) == (
        f"local: 502 Bad Gateway: {shown} (model m at {server.url}, before any output)"
    )
    assert [r.getMessage() for r in caplog.records] == [
        f"local: 502 Bad Gateway; retry {n} of 3 in 0.{2 ** (n - 1)}s" for n in (1, 2, 3)
    ]


async def test_a_page_instead_of_an_answer_is_cut_to_its_first_line(server, client):
    server.script(page(200, MINIFIED))
    request = ChatRequest("m", [Message("user", "hi")], stream=False)
    err = await failure(resilient(kind_of(server), server.base_url, client), request)
    assert err.message == f"the answer is not JSON: {MINIFIED[:200]}…"
    assert err.url == server.url


async def test_a_providers_json_message_is_not_cut_like_a_page(server, client):
    words = "Rate limit reached for requests." + " Please slow down." * 15
    server.script(*[error(429, words)] * 4)
    err = await failure(resilient(kind_of(server), server.base_url, client))
    assert len(words) > 200 and err.message == f"Too Many Requests: {words}"
