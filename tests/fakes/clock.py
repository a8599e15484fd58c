"""A clock that moves only when the test says: bounds of 15 s or 300 s proven in no time.

    clock = FakeClock()
    runner.clock = clock
    ...                      # start the thing that waits
    await clock.until_pending(1)
    clock.advance(14.9)      # still waiting
    clock.advance(0.1)       # the bound is reached: its scope is cancelled now
"""

from __future__ import annotations

from types import TracebackType

import anyio


class _Timer:
    """A scope on the fake clock: pending until its deadline, its cancel or its block's end."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.scope = anyio.CancelScope()
        self.open = True

    def __enter__(self) -> anyio.CancelScope:
        return self.scope.__enter__()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        # A bound whose block ended is no longer waited on, however it ended.
        self.open = False
        return bool(self.scope.__exit__(kind, exc, tb))

    @property
    def pending(self) -> bool:
        return self.open and not self.scope.cancel_called


class FakeClock:
    """Time starts at 0 and moves by advance(); a scope whose deadline is passed is cancelled."""

    def __init__(self) -> None:
        self._now = 0.0
        self._timers: list[_Timer] = []
        self._added = anyio.Event()

    def now(self) -> float:
        return self._now

    def move_on_after(self, seconds: float | None) -> _Timer:
        timer = _Timer(self._now + seconds if seconds is not None else float("inf"))
        if seconds is not None:
            if seconds <= 0:
                timer.scope.cancel()
            else:
                self._timers.append(timer)
                self._added.set()
                self._added = anyio.Event()
        return timer

    async def until_pending(self, count: int) -> list[float]:
        """Wait until `count` timers are pending; their deadlines (bound it with fail_after)."""
        while len(self.pending()) < count:
            await self._added.wait()
        return self.pending()

    async def until_deadline(self, deadline: float) -> None:
        """Wait until a pending timer ends at `deadline` (bound it with fail_after)."""
        while deadline not in self.pending():
            await self._added.wait()

    def pending(self) -> list[float]:
        """Deadlines of the scopes still open and not yet reached."""
        self._timers = [t for t in self._timers if t.open]
        return sorted(t.deadline for t in self._timers if t.pending)

    def advance(self, seconds: float) -> None:
        self._now += seconds
        due = [t for t in self._timers if t.deadline <= self._now]
        for timer in due:
            self._timers.remove(timer)
            timer.scope.cancel()
