"""Times in UTC as files and answers spell them: ISO 8601 with milliseconds and a Z
(`2026-12-01T21:06:44.123Z`), and the current time a turn reads."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

# Where a turn reads the current time from (its turn context's clock line); tests tick one.
Now = Callable[[], datetime]


def utc_now() -> datetime:
    """The current time, in UTC."""
    return datetime.now(UTC)


def now_iso() -> str:
    """The current time as ISO 8601 with milliseconds and a Z."""
    return iso(utc_now())


def iso(moment: datetime, timespec: Literal["milliseconds", "seconds"] = "milliseconds") -> str:
    """`moment` (a naive one is read as UTC) as ISO 8601 in UTC with a Z."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def parse_iso(stamp: str) -> datetime:
    """An ISO 8601 time (with a Z, an offset, or neither: UTC) as an aware datetime.

    ValueError when `stamp` is not one."""
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
