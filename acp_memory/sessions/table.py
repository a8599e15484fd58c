"""The sessions one front end (the ACP connection, the HTTP server) holds: each loaded once and
kept, a subagent's child session only read, and one turn at a time per session.

Its errors are neutral; each surface says them in its own terms (a JSON-RPC error, an HTTP
status, a print-mode exit code), alongside the store's SessionNotFound, BundleError and the
lock's BundleBusy.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

import anyio

from acp_memory.oserror import os_error_text
from acp_memory.sessions.store import Session, SessionStore

log = logging.getLogger(__name__)


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
    """The sessions of one front end and the scope of each one's running turn."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.sessions: dict[str, Session] = {}
        self.turns: dict[str, anyio.CancelScope] = {}
        self.stopping = False

    def add(self, session: Session) -> Session:
        self.sessions[session.id] = session
        return session

    async def get(self, session_id: str) -> Session:
        """A session of this front end, its bundle loaded on first use (SessionNotFound,
        BundleError)."""
        if session := self.sessions.get(session_id):
            return session
        session = await anyio.to_thread.run_sync(self.store.load, session_id)
        # Two requests may have loaded it at once; the first one in wins.
        return self.sessions.setdefault(session_id, session)

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
        return scope

    def release(self, session: Session) -> None:
        self.turns.pop(session.id, None)

    def cancel(self, session_id: str) -> bool:
        """Cancel the session's running turn; False when none runs."""
        scope = self.turns.get(session_id)
        if scope is None:
            return False
        scope.cancel()
        return True

    def stop(self) -> None:
        """Cancel every running turn and start no new one (the front end is stopping)."""
        self.stopping = True
        for scope in self.turns.values():
            scope.cancel()

    def forget(self, session_id: str) -> None:
        """Drop a session (its bundle was deleted)."""
        self.sessions.pop(session_id, None)

    def close(self, close_pool: Callable[[str], None]) -> None:
        """Stop each session's background work (close_pool) and release its bundle."""
        for session in self.sessions.values():
            close_pool(session.id)  # its tasks end with it, process groups and all
            session.close()
        self.sessions.clear()
