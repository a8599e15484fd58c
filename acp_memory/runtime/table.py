"""The sessions one front end (the ACP connection, the HTTP server) holds: each loaded once while
open, a subagent's child session only read, and one turn at a time per session.

A session stays open (in memory, and once written, locked) only while it is used. One that is
idle (no turn, no write, nothing the front end's `in_use` names: a background task, an events
stream) is let go `idle_seconds` after it was last seen in use, and the least recently used
idle one as soon as more than `max_open` are open: its pool closed (`on_release`), its lock
released, its transcript dropped. The next get() loads it again, so a front end holds a bounded
number of descriptors and transcripts however many sessions it has served.

Its errors are neutral; each surface says them in its own terms (a JSON-RPC error, an HTTP
status, a print-mode exit code), alongside the store's SessionNotFound, BundleError and the
lock's BundleBusy.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Iterator

import anyio

from acp_memory.clock import Clock
from acp_memory.oserror import os_error_text
from acp_memory.sessions.store import Session, SessionStore

log = logging.getLogger(__name__)

IDLE_SECONDS = 300.0  # sessions.idle_seconds
MAX_OPEN = 64  # sessions.max_open


class ReadOnlySession(Exception):
    """A subagent's child session: it may be read, never prompted or changed."""


class TurnRunning(Exception):
    """The session is already running a prompt."""


class Stopping(Exception):
    """The front end is stopping: no new turn starts."""


class SessionUnsaved(Exception):
    """The session's bundle could not be written; the message names the file and the reason."""


def refuse_child(session: Session) -> Session:
    """The session itself, or ReadOnlySession when a subagent ran it for another session."""
    record = session.record
    if record.subagent_run:
        who = record.subagent_name or "a subagent"
        raise ReadOnlySession(
            f"{session.id} is a child session that {who} ran for "
            f"{record.parent_session_id}; it is read-only"
        )
    return session


@contextlib.contextmanager
def saving(session: Session) -> Iterator[None]:
    """Around writes to a bundle: an OSError becomes SessionUnsaved (logged), never a
    traceback; BundleBusy passes as it is."""
    try:
        yield
    except OSError as exc:
        line = f"session {session.id} cannot be saved: {os_error_text(exc)}"
        log.warning("%s", line)
        raise SessionUnsaved(line) from None


class SessionTable:
    """The open sessions of one front end and the scope of each one's running turn."""

    def __init__(
        self,
        store: SessionStore,
        *,
        clock: Clock | None = None,
        idle_seconds: float = IDLE_SECONDS,
        max_open: int = MAX_OPEN,
        in_use: Callable[[str], bool] | None = None,
        on_release: Callable[[str], None] | None = None,
        on_idle: Callable[[Session], bool] | None = None,
        on_load: Callable[[Session], None] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock or Clock()  # what idle time is measured on; tests advance a fake
        self.idle_seconds = idle_seconds
        self.max_open = max_open
        self.in_use = _never if in_use is None else in_use
        self.on_release = _nothing if on_release is None else on_release
        # A session due to be let go for idleness: True when work just started for it (a
        # reflection run), which keeps it open; and a session just loaded from its bundle.
        self.on_idle = _keep_none if on_idle is None else on_idle
        self.on_load = _ignore if on_load is None else on_load
        # Open sessions, the least recently used first, and when each was last used.
        self.sessions: dict[str, Session] = {}
        self._used: dict[str, float] = {}
        # Sessions let go that some caller still holds: a get() hands back that very object
        # (and one that writes again is open again), so two objects of one bundle never
        # contend for its lock. The others are freed as usual.
        self._let_go: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self.turns: dict[str, anyio.CancelScope] = {}
        self._turn_ended: dict[str, anyio.Event] = {}  # set by release()
        self.stopping = False
        self._opened = anyio.Event()

    def add(self, session: Session) -> Session:
        """A session this front end just created, open from now on."""
        return self._open(session)

    async def get(self, session_id: str) -> Session:
        """A session of this front end, its bundle loaded when it is not open (SessionNotFound,
        BundleError)."""
        session = self.sessions.get(session_id) or self._let_go.get(session_id)
        if session is None:
            loaded = await anyio.to_thread.run_sync(self.store.load, session_id)
            # Two requests may have loaded it at once; the first one in wins.
            session = self.sessions.get(session_id) or self._let_go.get(session_id) or loaded
            if session is loaded:
                self._open(session)
                self.on_load(session)
        return self._open(session)

    async def writable(self, session_id: str) -> Session:
        """A session that may be prompted or changed: never a child session."""
        return refuse_child(await self.get(session_id))

    def running(self, session_id: str) -> bool:
        return session_id in self.turns

    def claim(self, session: Session) -> anyio.CancelScope:
        """Hold the session for one turn until release(); TurnRunning while another holds
        it, Stopping once stop() was called. The scope is what cancel() cancels."""
        if session.id in self.turns:
            raise TurnRunning(f"session {session.id} is already running a prompt")
        if self.stopping:
            raise Stopping("stopping")
        scope = self.turns[session.id] = anyio.CancelScope()
        self._turn_ended[session.id] = anyio.Event()
        self._open(session)
        return scope

    def release(self, session: Session) -> None:
        """End the session's claim: it was used until now."""
        self.turns.pop(session.id, None)
        if (ended := self._turn_ended.pop(session.id, None)) is not None:
            ended.set()
        if session.id in self.sessions:
            self._open(session)

    def cancel(self, session_id: str) -> bool:
        """Cancel the session's running turn; False when none runs."""
        scope = self.turns.get(session_id)
        if scope is None:
            return False
        scope.cancel()
        return True

    async def settle(self, session_id: str) -> None:
        """Cancel the session's running turn, if any, and wait until it has ended."""
        ended = self._turn_ended.get(session_id)
        self.cancel(session_id)
        if ended is not None:
            await ended.wait()

    def stop(self) -> None:
        """Cancel every running turn and start no new one (the front end is stopping)."""
        self.stopping = True
        for scope in self.turns.values():
            scope.cancel()

    def forget(self, session_id: str) -> None:
        """Drop a session (its bundle was deleted)."""
        self.sessions.pop(session_id, None)
        self._used.pop(session_id, None)
        self._let_go.pop(session_id, None)

    def discard(self, session: Session) -> None:
        """Release the session's bundle and drop it (the client closed it); the next get()
        loads it again."""
        session.close()
        self.forget(session.id)

    def close(self) -> None:
        """Stop each open session's background work (on_release) and release its bundle."""
        for session in self.sessions.values():
            self.on_release(session.id)  # its tasks end with it, process groups and all
            session.close()
        self.sessions.clear()
        self._used.clear()

    # -- letting idle sessions go --------------------------------------------------------

    def idle(self, session: Session) -> bool:
        """No turn, no write and nothing of the front end's (in_use) holds the session."""
        return not (
            session.id in self.turns or session.writing or self.in_use(session.id)
        )

    def release_idle(self) -> None:
        """Let go each session unused for idle_seconds; one found in use counts as used now."""
        now = self.clock.now()
        for session in list(self.sessions.values()):
            if now - self._used[session.id] < self.idle_seconds:
                continue
            if self.idle(session) and not self.on_idle(session):
                self._let_go_of(session)
            else:
                self._open(session)

    @contextlib.asynccontextmanager
    async def releasing(self) -> AsyncIterator[SessionTable]:
        """Let idle sessions go on time (release_idle), from a task of this block's own group,
        until the block ends."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._release_on_time)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()

    async def _release_on_time(self) -> None:
        while True:
            opened = self._opened = anyio.Event()
            with self.clock.move_on_after(self._until_due()) as wait:
                await opened.wait()  # a new session may be due before the one waited for
            wait.cancel()  # done with it, woken or not (a fake clock then stops counting it)
            self.release_idle()

    def _until_due(self) -> float | None:
        """Seconds until the least recently used session is due, None when none is open."""
        if not self._used:
            return None
        return max(0.0, min(self._used.values()) + self.idle_seconds - self.clock.now())

    def _open(self, session: Session) -> Session:
        """The session open and just used; past max_open, the least recently used idle
        sessions other than this one are let go."""
        self._let_go.pop(session.id, None)
        known = self.sessions.pop(session.id, None) is not None
        self.sessions[session.id] = session
        self._used[session.id] = self.clock.now()
        # A holder of a session let go that writes it takes its lock again: open again too.
        session.on_locked = self._open
        if not known:
            self._opened.set()
        excess = len(self.sessions) - self.max_open
        if excess > 0:
            older = [s for s in self.sessions.values() if s is not session and self.idle(s)]
            for idle in older[:excess]:
                self._let_go_of(idle)
        return session

    def _let_go_of(self, session: Session) -> None:
        del self.sessions[session.id]
        del self._used[session.id]
        self._let_go[session.id] = session
        self.on_release(session.id)  # an idle pool: nothing running is stopped
        session.close()


def _never(session_id: str) -> bool:
    return False


def _nothing(session_id: str) -> None:
    return None


def _keep_none(session: Session) -> bool:
    return False


def _ignore(session: Session) -> None:
    return None
