"""The resilience layer over real HTTP: retries, timeouts, auth errors, output flags, cancel."""

from __future__ import annotations

import anyio
import httpx
import pytest
from fakes.anthropic_server import FakeAnthropic
from fakes.httpserver import FakeModelServer
from fakes.openai_server import FakeOpenAI
from fakes.script import dropped, endless, error, stall, text
from fakes.streams import RecordingSleep, collect, finished, text_of

from acp_memory.llm.anthropic import AnthropicProvider
from acp_memory.llm.openai import OpenAIProvider
from acp_memory.llm.provider import Provider
from acp_memory.llm.resilient import ResilientProvider, RetryPolicy
from acp_memory.llm.transport import ConnectionDropped, StreamTimeouts
from acp_memory.llm.types import ChatRequest, LLMError, Message, StreamEvent

pytestmark = pytest.mark.anyio

REQUEST = ChatRequest("m", [Message("user", "hi")])
NO_JITTER = RetryPolicy(max_retries=3, base_delay=0.1, jitter=0)


@pytest.fixture(params=["openai", "anthropic"])
async def server(request: pytest.FixtureRequest):
    fake = FakeOpenAI() if request.param == "openai" else FakeAnthropic()
    async with fake:
        yield fake


def raw(
    server: FakeModelServer, client: httpx.AsyncClient, timeouts: StreamTimeouts | None = None
) -> Provider:
    cls = OpenAIProvider if isinstance(server, FakeOpenAI) else AnthropicProvider
    return cls(client, name="fake", api_base=server.base_url, api_key="k", timeouts=timeouts)


def resilient(
    server: FakeModelServer,
    client: httpx.AsyncClient,
    policy: RetryPolicy = NO_JITTER,
    timeouts: StreamTimeouts | None = None,
) -> tuple[ResilientProvider, RecordingSleep]:
    sleep = RecordingSleep()
    return ResilientProvider(raw(server, client, timeouts), policy, sleep=sleep), sleep


async def failure(provider: Provider, got: list[StreamEvent] | None = None) -> LLMError:
    with anyio.fail_after(5), pytest.raises(LLMError) as caught:
        await collect(provider.stream(REQUEST), got)
    return caught.value


async def test_429_is_retried_after_the_announced_retry_after(server, client):
    server.script(error(429, "slow down", retry_after=2), text("done"))
    provider, sleep = resilient(server, client)
    events = await collect(provider.stream(REQUEST))
    assert text_of(events) == "done"
    assert sleep.delays == [2.0]
    assert len(server.requests) == 2


async def test_retry_after_as_an_http_date_is_honoured(server, client):
    server.script(error(503, "busy", retry_after="Wed, 21 Oct 2015 07:28:00 GMT"), text("ok"))
    provider, sleep = resilient(server, client)
    await collect(provider.stream(REQUEST))
    assert sleep.delays == [0.0]  # a date in the past: go at once


async def test_server_errors_back_off_exponentially(server, client):
    server.script(error(500, "a"), error(502, "b"), error(503, "c"), text("ok"))
    provider, sleep = resilient(server, client)
    assert text_of(await collect(provider.stream(REQUEST))) == "ok"
    assert sleep.delays == pytest.approx([0.1, 0.2, 0.4])


async def test_server_errors_surface_after_llm_retry_max(server, client):
    server.script(*[error(500, "still down")] * 3)
    provider, sleep = resilient(
        server, client, RetryPolicy(max_retries=2, base_delay=0.01, jitter=0)
    )
    err = await failure(provider)
    assert err.status == 500 and "still down" in err.message and not err.after_output
    assert len(server.requests) == 3 and len(sleep.delays) == 2


def test_backoff_jitter_stays_within_its_bound() -> None:
    policy = RetryPolicy(base_delay=1.0, jitter=0.25, max_delay=3.0)
    delays = [policy.backoff(n) for n in (0, 1, 2, 5) for _ in range(50)]
    assert all(0.75 <= d <= 3.75 for d in delays)
    assert RetryPolicy(base_delay=1.0, jitter=0).backoff(3) == 8.0


async def test_real_sleeps_are_used_by_default(server, client, monkeypatch):
    # anyio.sleep itself is replaced: a default that waits for nothing would never call it.
    sleep = RecordingSleep()
    monkeypatch.setattr(anyio, "sleep", sleep)
    server.script(error(500, "x"), text("ok"))
    provider = ResilientProvider(raw(server, client), NO_JITTER)
    assert text_of(await collect(provider.stream(REQUEST))) == "ok"
    assert sleep.delays == [0.1]


async def test_dropped_keepalive_connection_is_retried_once_on_a_new_one(server, client):
    server.script(text("first"), dropped(), text("second"))
    provider, sleep = resilient(server, client)
    assert text_of(await collect(provider.stream(REQUEST))) == "first"
    assert text_of(await collect(provider.stream(REQUEST))) == "second"
    assert len(server.requests) == 3
    assert server.connections == 2  # the first call's connection was reused, then replaced
    assert sleep.delays == []


async def test_a_connection_dropped_twice_surfaces_before_output(server, client):
    server.script(dropped(), dropped(), text("never"))
    provider, _ = resilient(server, client)
    err = await failure(provider)
    assert isinstance(err, ConnectionDropped) and not err.after_output
    assert len(server.requests) == 2


async def test_stream_broken_after_output_is_not_retried(server, client):
    server.script(text("Hello big world", chunks=4).broken_after(2), text("again"))
    provider, _ = resilient(server, client)
    got: list[StreamEvent] = []
    err = await failure(provider, got)
    assert err.after_output
    assert text_of(got) == "Hello bi"  # two of four pieces, never repeated
    assert len(server.requests) == 1
    assert "after some output" in str(err)


async def test_stream_broken_before_output_is_retried_like_a_dropped_connection(server, client):
    server.script(text("lost").broken_after(0), text("ok"))
    provider, _ = resilient(server, client)
    assert text_of(await collect(provider.stream(REQUEST))) == "ok"


async def test_first_token_timeout_cuts_a_silent_stream(server, client):
    server.script(stall(), text("never"))
    provider, _ = resilient(server, client, timeouts=StreamTimeouts(first_event=0.05))
    err = await failure(provider)
    assert not err.after_output and "no answer within 0.05s" in err.message
    assert len(server.requests) == 1  # a silent model is not called again
    with anyio.fail_after(10):
        await server.client_gone.wait()


async def test_first_token_timeout_covers_waiting_for_the_headers(server, client):
    server.script(stall(before_headers=True))
    provider, _ = resilient(server, client, timeouts=StreamTimeouts(first_event=0.05))
    assert "no answer within" in (await failure(provider)).message


async def test_timeout_ms_bounds_a_whole_answer_that_drips_in_byte_by_byte(server, client):
    # A byte every 50 ms: no single read waits a second, only the whole request does.
    server.script(endless(b" ", every=0.05), endless(b" ", every=0.05))
    cls = OpenAIProvider if isinstance(server, FakeOpenAI) else AnthropicProvider
    provider = cls(client, name="fake", api_base=server.base_url, api_key="k", timeout_s=1.0)
    with anyio.fail_after(30), pytest.raises(LLMError) as caught:
        await collect(provider.stream(ChatRequest("m", [Message("user", "hi")], stream=False)))
    assert caught.value.message == "no answer within 1s"
    with anyio.fail_after(30):
        probe = await provider.probe("m")  # doctor --online's call
    assert (probe.status, probe.problem) == (None, "no answer within 1s")


async def test_idle_timeout_cuts_a_stream_that_stalls_after_output(server, client):
    server.script(text("Hello world", chunks=3).stalled_after(1))
    provider, _ = resilient(server, client, timeouts=StreamTimeouts(first_event=5, idle=0.05))
    got: list[StreamEvent] = []
    err = await failure(provider, got)
    assert err.after_output and "stalled for 0.05s" in err.message
    assert text_of(got) == "Hell"


async def test_a_stall_shorter_than_the_idle_timeout_is_waited_out(server, client):
    release = anyio.Event()
    server.script(text("Hello world", chunks=2).stalled_after(1, release=release))
    provider, _ = resilient(server, client, timeouts=StreamTimeouts(first_event=5, idle=5))
    got: list[StreamEvent] = []
    with anyio.fail_after(5):
        async for event in provider.stream(REQUEST):
            got.append(event)
            release.set()  # the server resumes only once the first piece arrived
    assert text_of(got) == "Hello world"
    finished(got)


def test_zero_timeouts_disable_them() -> None:
    assert StreamTimeouts.from_ms(0, 0) == StreamTimeouts(None, None)
    assert StreamTimeouts.from_ms(1500, 20) == StreamTimeouts(1.5, 0.02)


@pytest.mark.parametrize(
    ("status", "phrase"), [(401, "Unauthorized"), (402, "Payment Required"), (403, "Forbidden")]
)
async def test_auth_and_billing_errors_are_not_retried_and_keep_the_provider_message(
    server, client, status, phrase
):
    server.script(error(status, "subscription expired"), text("never"))
    provider, sleep = resilient(server, client)
    err = await failure(provider)
    assert err.status == status and not err.retryable and not err.after_output
    assert err.message == f"{phrase}: subscription expired"
    call = f"model m at {server.url}"
    assert str(err) == f"fake: {status} {phrase}: subscription expired ({call}, before any output)"
    assert len(server.requests) == 1 and sleep.delays == []


async def test_long_limit_reset_fails_at_once_when_not_waiting(server, client):
    server.script(error(429, "quota exhausted", retry_after=3600), text("never"))
    provider, sleep = resilient(server, client)
    err = await failure(provider)
    assert err.status == 429 and not err.after_output
    assert "quota exhausted" in err.message and "the limit resets at" in err.message
    assert "in 1h 00m" in err.message and "wait_for_limit_reset" in err.message
    assert len(server.requests) == 1 and sleep.delays == []


async def test_long_limit_reset_is_waited_for_when_configured(server, client):
    server.script(error(429, "quota exhausted", retry_after=3600), text("after reset"))
    policy = RetryPolicy(base_delay=0.01, jitter=0, wait_for_limit_reset=True)
    provider, sleep = resilient(server, client, policy)
    assert text_of(await collect(provider.stream(REQUEST))) == "after reset"
    assert sleep.delays == [3600.0]


@pytest.mark.parametrize(
    "headers",
    [
        {"x-ratelimit-reset-requests": "2h0m0s", "x-ratelimit-remaining-requests": "0"},
        {
            "anthropic-ratelimit-tokens-reset": "2099-01-01T00:00:00Z",
            "anthropic-ratelimit-tokens-remaining": "0",
        },
    ],
)
async def test_rate_limit_reset_headers_count_as_the_announced_wait(server, client, headers):
    server.script(error(429, "limit", headers=headers))
    provider, _ = resilient(server, client)
    err = await failure(provider)
    assert "the limit resets at" in err.message and err.retry_after and err.retry_after > 3600


async def test_cancelling_the_consumer_closes_the_http_stream(server, client):
    server.script(stall())
    provider, _ = resilient(server, client)
    async with anyio.create_task_group() as tg:
        tg.start_soon(collect, provider.stream(REQUEST))
        with anyio.fail_after(10):
            await server.wait_for_requests(1)
        tg.cancel_scope.cancel()
    with anyio.fail_after(10):
        await server.client_gone.wait()


async def test_closing_the_stream_mid_answer_closes_the_connection(server, client):
    server.script(text("Hello world", chunks=3).stalled_after(1))
    provider, _ = resilient(server, client)
    events = provider.stream(REQUEST)
    with anyio.fail_after(10):
        first = await anext(events)
        await events.aclose()  # type: ignore[attr-defined]
        await server.client_gone.wait()
    assert text_of([first]) == "Hell"


async def test_cancel_during_a_retry_wait_stops_promptly(server, client):
    server.script(error(503, "busy", retry_after=30))
    waiting = anyio.Event()
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        # The real sleep, once we know the provider is in it (the request's arrival at the
        # server is too early: the cancel would land while the 503 is still being read).
        delays.append(delay)
        waiting.set()
        await anyio.sleep(delay)

    provider = ResilientProvider(raw(server, client), NO_JITTER, sleep=sleep)
    # The 503 asks for 30 s; a cancel during that wait must end it, well within the bound.
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(collect, provider.stream(REQUEST))
            await waiting.wait()
            tg.cancel_scope.cancel()
    assert delays == [30] and len(server.requests) == 1
