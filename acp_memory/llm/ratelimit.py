"""When a provider says we may call again: Retry-After and the rate-limit reset headers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from acp_memory.timestamps import parse_iso

_RESET_HEADERS = (
    # (reset header, matching remaining header)
    ("x-ratelimit-reset-requests", "x-ratelimit-remaining-requests"),
    ("x-ratelimit-reset-tokens", "x-ratelimit-remaining-tokens"),
    ("anthropic-ratelimit-requests-reset", "anthropic-ratelimit-requests-remaining"),
    ("anthropic-ratelimit-tokens-reset", "anthropic-ratelimit-tokens-remaining"),
    ("anthropic-ratelimit-input-tokens-reset", "anthropic-ratelimit-input-tokens-remaining"),
    ("anthropic-ratelimit-output-tokens-reset", "anthropic-ratelimit-output-tokens-remaining"),
)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_EPOCH_THRESHOLD = 1_000_000_000  # a bare number this large is a Unix time, not a duration


def announced_wait(
    headers: Mapping[str, str], status: int, now: datetime | None = None
) -> float | None:
    """Seconds the provider asks us to wait: Retry-After, else (on a 429) the limit's reset."""
    now = now or datetime.now(UTC)
    wait = retry_after(headers, now)
    if wait is None and status == 429:
        wait = limit_reset(headers, now)
    return wait


def retry_after(headers: Mapping[str, str], now: datetime) -> float | None:
    """retry-after-ms, else Retry-After in seconds or as an HTTP date."""
    millis = _float(headers.get("retry-after-ms"))
    if millis is not None:
        return max(0.0, millis / 1000)
    value = headers.get("retry-after")
    if not value:
        return None
    seconds = _float(value)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def limit_reset(headers: Mapping[str, str], now: datetime) -> float | None:
    """The reset of the exhausted limit, else the earliest announced reset."""
    exhausted: list[float] = []
    others: list[float] = []
    for reset_name, remaining_name in _RESET_HEADERS:
        value = headers.get(reset_name)
        seconds = parse_reset(value, now) if value else None
        if seconds is None:
            continue
        remaining = _float(headers.get(remaining_name))
        (exhausted if remaining == 0 else others).append(seconds)
    if exhausted:
        return max(exhausted)
    return min(others) if others else None


def parse_reset(value: str, now: datetime) -> float | None:
    """A reset as a duration ("6m0s", "20ms", "1.5"), a Unix time or an RFC 3339 time."""
    value = value.strip()
    number = _float(value)
    if number is not None:
        return max(0.0, number - now.timestamp() if number > _EPOCH_THRESHOLD else number)
    parts = _DURATION_PART.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
        return sum(float(n) * scale[u] for n, u in parts)
    try:
        when = parse_iso(value)
    except ValueError:
        return None
    return max(0.0, (when - now).total_seconds())


def _float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None
