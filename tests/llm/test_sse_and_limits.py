"""The small pure parts: SSE decoding, error bodies, rate-limit headers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from acp_memory.llm.ratelimit import announced_wait, parse_reset, retry_after
from acp_memory.llm.sse import SSEDecoder, SSEEvent
from acp_memory.llm.transport import provider_message

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def decode(lines: list[str]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [e for line in lines if (e := decoder.feed(line))]
    tail = decoder.flush()
    return events + ([tail] if tail else [])


def test_sse_events_with_names_multiline_data_comments_and_crlf() -> None:
    lines = [
        ": keep-alive",
        "event: message_start",
        'data: {"a":',
        "data: 1}\r",
        "",
        "data:x",
        "",
        "",
        "data: tail",
    ]
    assert decode(lines) == [
        SSEEvent("message_start", '{"a":\n1}'),
        SSEEvent("message", "x"),
        SSEEvent("message", "tail"),
    ]


def test_an_event_name_without_data_is_not_an_event() -> None:
    assert decode(["event: ping", "", "data: y", ""]) == [SSEEvent("message", "y")]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"error": {"message": "bad key", "type": "invalid"}}', "bad key"),
        (b'{"type": "error", "error": {"type": "x", "message": "overloaded"}}', "overloaded"),
        (b'{"error": "plain"}', "plain"),
        (b'{"detail": "nope"}', "nope"),
        (b'[{"error": {"message": "listed"}}]', "listed"),
        (b"upstream timeout", "upstream timeout"),
    ],
)
def test_provider_messages_are_found_in_the_usual_error_shapes(body: bytes, message: str) -> None:
    assert provider_message(body) == message


def test_retry_after_in_seconds_milliseconds_and_http_dates() -> None:
    assert retry_after({"retry-after": "7"}, NOW) == 7.0
    assert retry_after({"retry-after-ms": "250", "retry-after": "7"}, NOW) == 0.25
    assert retry_after({"retry-after": "Wed, 01 Jan 2025 12:01:30 GMT"}, NOW) == 90.0
    assert retry_after({"retry-after": "soon"}, NOW) is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("6m0s", 360.0),
        ("1h2m3.5s", 3723.5),
        ("20ms", 0.02),
        ("1.5", 1.5),
        ("2025-01-01T13:00:00Z", 3600.0),
        (str(int(NOW.timestamp()) + 60), 60.0),
    ],
)
def test_reset_headers_in_every_format_we_meet(value: str, seconds: float) -> None:
    assert parse_reset(value, NOW) == pytest.approx(seconds)


def test_the_exhausted_limit_decides_the_wait() -> None:
    headers = {
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-remaining-requests": "10",
        "x-ratelimit-reset-tokens": "30m",
        "x-ratelimit-remaining-tokens": "0",
    }
    assert announced_wait(headers, 429, NOW) == 1800.0
    assert announced_wait(headers, 500, NOW) is None  # reset headers speak only for a 429
    assert announced_wait({**headers, "retry-after": "3"}, 429, NOW) == 3.0
