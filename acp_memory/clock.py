"""The clock that the bounds of background work read: run timeouts, the turn's wait for its
memory report, the wait for memory runs when the agent stops, and an MCP tool call's timeout.

It is anyio's own clock. Tests that prove a 15-second or 300-second bound pass a clock they
advance by hand (tests/fakes/clock.py) instead of waiting for it.
"""

from __future__ import annotations

import anyio


class Clock:
    """anyio's monotonic clock, and timeouts on it."""

    def now(self) -> float:
        """Seconds on a monotonic clock."""
        return anyio.current_time()

    def move_on_after(self, seconds: float | None) -> anyio.CancelScope:
        """A cancel scope that ends its block after `seconds` (None: never)."""
        return anyio.move_on_after(seconds)
