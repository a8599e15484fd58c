"""A clock that moves only when the test says: bounds of 15 s or 300 s proven in no time.

    clock = FakeClock()
    runner.clock = clock
    ...                      # start the thing that waits
    await clock.until_pending(1)
    clock.advance(14.9)      # still waiting
    clock.advance(0.1)       # the bound is reached: its scope is cancelled now
"""

from __future__ import annotations

import anyio


class FakeClock:
    """Time starts at 0 and moves by advance(); a scope whose deadline is passed is cancelled."""

    def __init__(self) -> None:
        self._now = 0.0
        self._timers: list[tuple[float, anyio.CancelScope]] = []
        self._added = anyio.Event()

    def now(self) -> float:
        return self._now

    def move_on_after(self, seconds: float | None) -> anyio.CancelScope:
        scope = anyio.CancelScope()
        if seconds is not None:
            if seconds <= 0:
                scope.cancel()
            else:
                self._timers.append((self._now + seconds, scope))
                self._added.set()
                self._added = anyio.Event()
        return scope

    async def until_pending(self, count: int) -> list[float]:
        """Wait until `count` timers are pending; their deadlines (bound it with fail_after)."""
        while len(self.pending()) < count:
            await self._added.wait()
        return self.pending()

    def pending(self) -> list[float]:
        """Deadlines of the scopes still open and not yet reached."""
        return sorted(d for d, s in self._timers if not s.cancel_called)

    def advance(self, seconds: float) -> None:
        self._now += seconds
        due = [(d, s) for d, s in self._timers if d <= self._now]
        for timer in due:
            self._timers.remove(timer)
            timer[1].cancel()
