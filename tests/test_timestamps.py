"""The one spelling of a time in files and answers: ISO 8601 in UTC, milliseconds, a Z."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from acp_memory.timestamps import iso, now_iso, parse_iso, utc_now


def test_now_is_utc_with_milliseconds_and_a_z() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", now_iso())
    assert utc_now().tzinfo is UTC


def test_a_moment_is_spelled_in_utc_whatever_its_zone() -> None:
    moment = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    assert iso(moment) == "2030-01-02T03:04:05.678Z"
    assert iso(moment, timespec="seconds") == "2030-01-02T03:04:05Z"
    plus_two = moment.astimezone(timezone(timedelta(hours=2)))
    assert iso(plus_two) == "2030-01-02T03:04:05.678Z"
    assert iso(moment.replace(tzinfo=None)) == "2030-01-02T03:04:05.678Z"  # naive: UTC


def test_a_stamp_reads_back_as_the_same_aware_moment() -> None:
    moment = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    assert parse_iso(iso(moment)) == moment
    assert parse_iso("2030-01-02T05:04:05.678+02:00") == moment
    assert parse_iso("2030-01-02T03:04:05.678") == moment  # no zone: UTC
    with pytest.raises(ValueError):
        parse_iso("6m0s")
