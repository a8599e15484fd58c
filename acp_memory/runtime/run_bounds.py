"""The memory runs' in-flight bounds: at most so many runs per session and per process, a run
that finds a bound full skipped, never queued."""

from __future__ import annotations

import contextlib

import anyio

# Turns of a session are serialised, so runs overlap only when turns end faster than runs.
SESSION_RUNS_IN_FLIGHT = 2
PROCESS_RUNS_IN_FLIGHT = 16


class RunBounds:
    """Memory runs in flight: at most `session_limit` per session and `process.total_tokens`
    in all. A run holds one token of each on its own behalf until it ends; a bound that is
    full skips the run, never queues it."""

    def __init__(
        self,
        session_limit: int = SESSION_RUNS_IN_FLIGHT,
        process_limit: int = PROCESS_RUNS_IN_FLIGHT,
    ) -> None:
        self.session_limit = session_limit  # read when a session's first run is admitted
        self.process = anyio.CapacityLimiter(process_limit)
        self._sessions: dict[str, anyio.CapacityLimiter] = {}  # sessions with a run in flight

    def admit(self, session_id: str, run: object) -> str | None:
        """Take a token of both bounds for run; None when it may start, else why not (the
        seed's words). Synchronous: a turn of another session starting now sees it."""
        mine = self._sessions.get(session_id) or anyio.CapacityLimiter(self.session_limit)
        try:
            mine.acquire_on_behalf_of_nowait(run)
        except anyio.WouldBlock:
            return f"memory runs in flight for this session: {_held(mine)}"
        try:
            self.process.acquire_on_behalf_of_nowait(run)
        except anyio.WouldBlock:
            mine.release_on_behalf_of(run)
            return f"memory runs in flight for this process: {_held(self.process)}"
        self._sessions[session_id] = mine
        return None

    def release(self, session_id: str, run: object) -> None:
        """Give back the tokens run holds (it ended, or it never started)."""
        mine = self._sessions.get(session_id)
        if mine is None:
            return
        with contextlib.suppress(RuntimeError):  # not held: given back already
            mine.release_on_behalf_of(run)
            self.process.release_on_behalf_of(run)
        if mine.borrowed_tokens == 0:
            del self._sessions[session_id]

    def in_flight(self, session_id: str | None = None) -> int:
        """Runs holding a token: of session_id, or of the whole process."""
        if session_id is None:
            return int(self.process.borrowed_tokens)
        mine = self._sessions.get(session_id)
        return 0 if mine is None else int(mine.borrowed_tokens)


def _held(limiter: anyio.CapacityLimiter) -> str:
    return f"{int(limiter.borrowed_tokens)} of {int(limiter.total_tokens)}"
