"""The server's side of sessions: the bundles it writes, the turns running in it, and the
updates of each turn on its session's events stream.

Reads (a session's record, its transcript) come from disk, so a child session, or a session
another process writes, is always shown as it is now. Turns run one at a time per session;
a second one is refused (409) rather than queued.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any

import anyio
from anyio.abc import TaskGroup

from acp_memory.acp.updates import event_update
from acp_memory.engine.events import TurnEvent
from acp_memory.engine.turn import StopReason
from acp_memory.httpserver.errors import ApiError
from acp_memory.httpserver.events import EventHub
from acp_memory.llm.registry import UnknownModelError
from acp_memory.llm.types import LLMError
from acp_memory.llm.usage import UsageMeter
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.store import MemoryStore
from acp_memory.modes import MODES, unknown_mode
from acp_memory.oserror import os_error_text
from acp_memory.paths import NotAWorkspace, check_workspace
from acp_memory.runtime.runner import SessionRunner
from acp_memory.runtime.table import (
    ReadOnlySession,
    SessionUnsaved,
    Stopping,
    TurnRunning,
    saving,
)
from acp_memory.sessions.lock import BundleBusy
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import BundleError, Session, SessionNotFound
from acp_memory.tasks.pool import TaskPool

OnEvent = Callable[[TurnEvent], Awaitable[None]]


class HttpAgent:
    """Sessions and turns of one server, over the surface's session runner."""

    def __init__(self, runner: SessionRunner) -> None:
        self.runner = runner
        self.cfg = runner.cfg
        self.paths = runner.paths
        self.store = runner.store
        self.events = EventHub()
        # An events stream being read keeps its session open, as a turn or a task does; a
        # reflection's memory_run updates go to the session's stream.
        self.table = runner.session_table(in_use=self.events.watched,
                                          notify_memory=self._memory_run)
        self._owner: TaskGroup | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[HttpAgent]:
        """Own the turns that outlive their request (streamed answers), and the timer that lets
        idle sessions go, until the block ends; then every turn is cancelled and every events
        stream ends."""
        async with anyio.create_task_group() as tg, self.table.releasing():
            self._owner = tg
            try:
                yield self
            finally:
                self.stop()
                self._owner = None

    @property
    def owner(self) -> TaskGroup:
        if self._owner is None:
            raise RuntimeError("the HTTP agent is not running")
        return self._owner

    def stop(self) -> None:
        """Cancel every running turn and end every events stream (the server is stopping)."""
        self.table.stop()
        self.events.close()

    async def _memory_run(self, session_id: str, update: dict[str, Any]) -> None:
        self.events.publish(session_id, {"sessionUpdate": "memory_run", **update})

    def close(self) -> None:
        """Stop the sessions' background work and release their bundles."""
        self.table.close()

    # -- sessions ------------------------------------------------------------------------------

    async def create(
        self,
        cwd: str,
        mode: str = "agent",
        model: str | None = None,
        messages: Sequence[TranscriptMessage] = (),
    ) -> Session:
        """A new session in the folder cwd, starting from `messages` (an earlier conversation)."""
        try:
            await check_workspace(cwd)
        except NotAWorkspace as exc:
            raise ApiError(400, f"cwd: {exc}") from None
        self.check_mode(mode)
        if model is not None:
            self.check_model(model)
        try:
            session = await self.runner.create_session(
                cwd, model_id=model, mode=mode, messages=messages
            )
        except OSError as exc:
            raise ApiError(500, f"cannot create the session: {os_error_text(exc)}") from None
        return self.table.add(session)

    async def read(self, session_id: str) -> Session:
        """A session as it is now, child sessions included (for reading only)."""
        session = self.table.sessions.get(session_id)
        if session is not None and session.lock.held:
            return session  # this process writes it: memory and disk agree
        with _loading(session_id):
            return await anyio.to_thread.run_sync(self.store.load, session_id)

    async def writable(self, session_id: str) -> Session:
        """A session this server may run turns in and change: never a child session."""
        with _loading(session_id):
            try:
                return await self.table.writable(session_id)
            except ReadOnlySession as exc:
                raise ApiError(400, f"session {exc}") from None

    def running_turn(self, session_id: str) -> bool:
        return self.table.running(session_id)

    async def configure(
        self, session: Session, mode: str | None = None, model: str | None = None
    ) -> None:
        """Switch the session's mode or model (session.json is written when either changes)."""
        record = session.record
        if mode is not None:
            self.check_mode(mode)
        if model is not None:
            self.check_model(model)
        wanted = (mode or record.mode, model or record.selected_model_id)
        if wanted == (record.mode, record.selected_model_id):
            return
        record.mode, record.selected_model_id = wanted
        with _writes(session):
            await session.save_record()

    async def delete(self, session_id: str) -> None:
        """Delete a session's bundle, its child sessions with it; its tasks are stopped first."""
        session = await self.writable(session_id)
        with self.claimed(session):
            try:
                await self.runner.delete_session(self.table, session)
            except BundleBusy as exc:
                raise ApiError(409, f"session {session_id} is busy: {exc}") from None
            except OSError as exc:
                self.events.end(session_id)  # its tasks stopped: whatever is left, it is gone
                raise ApiError(500, f"cannot delete {session.dir}: {os_error_text(exc)}") from None
            self.events.end(session_id)

    def check_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ApiError(400, unknown_mode(mode))

    def check_model(self, model: str) -> None:
        if model not in self.cfg.model_ids():
            raise ApiError(
                400, f"unknown model {model!r}; choose one of {', '.join(self.cfg.model_ids())}"
            )

    # -- turns ---------------------------------------------------------------------------------

    def claim(self, session: Session) -> anyio.CancelScope:
        """Hold the session for one turn (or a deletion) until release(); 409 while another
        holds it. The scope is what cancel() cancels."""
        try:
            return self.table.claim(session)
        except TurnRunning as exc:
            raise ApiError(409, f"{exc}; wait for its answer or cancel it first") from None
        except Stopping:
            raise ApiError(503, "the server is stopping") from None

    def release(self, session: Session) -> None:
        self.table.release(session)

    @contextlib.contextmanager
    def claimed(self, session: Session) -> Iterator[anyio.CancelScope]:
        """claim() for the length of a block."""
        scope = self.claim(session)
        try:
            yield scope
        finally:
            self.release(session)

    async def run_turn(
        self,
        session: Session,
        text: str,
        scope: anyio.CancelScope,
        on_event: OnEvent | None = None,
        meter: UsageMeter | None = None,
    ) -> StopReason:
        """One user turn of a claimed session, inside `scope` (which cancel() cancels). Its
        updates, memory_run included, go to the session's events stream and to on_event;
        meter counts its model calls' tokens."""

        async def emit(event: TurnEvent) -> None:
            self.events.publish(session.id, event_update(event))
            if on_event is not None:
                await on_event(event)

        async def notify_memory(update: dict[str, Any]) -> None:
            self.events.publish(session.id, {"sessionUpdate": "memory_run", **update})

        stop: StopReason = "cancelled"
        try:
            with scope, _writes(session):
                stop = await self.runner.run_turn(
                    session, text, emit, notify_memory=notify_memory, meter=meter
                )
        except UnknownModelError as exc:
            raise ApiError(400, str(exc)) from None
        except LLMError as exc:
            raise ApiError(502, f"model call failed: {exc}") from None
        return "cancelled" if scope.cancel_called else stop

    def cancel(self, session_id: str) -> bool:
        """Cancel the session's running turn; False when none runs."""
        return self.table.cancel(session_id)

    # -- the session's services ------------------------------------------------------------

    def pool(self, session: Session) -> TaskPool:
        """The session's tasks as they are: the running pool, or a view kept for no longer
        than the request (a session this server only reads must not keep a pool)."""
        return self.runner.pool_view(session)

    def memory_store(self, session: Session) -> MemoryStore:
        """The notes of the session: the global root and its workspace's `memory/`."""
        return self.runner.memory.store_for(session.record.cwd, ChangeSource("http", session.id))


@contextlib.contextmanager
def _loading(session_id: str) -> Iterator[None]:
    """A session that is not there, or whose bundle cannot be read, is a 404."""
    try:
        yield
    except SessionNotFound:
        raise ApiError(404, f"session not found: {session_id}") from None
    except BundleError as exc:
        raise ApiError(404, f"session {session_id} cannot be loaded: {exc}") from None


@contextlib.contextmanager
def _writes(session: Session) -> Iterator[None]:
    """A bundle that cannot be written becomes a clear error, never a traceback."""
    try:
        with saving(session):
            yield
    except BundleBusy as exc:
        raise ApiError(409, f"session {session.id} is busy: {exc}") from None
    except SessionUnsaved as exc:
        raise ApiError(500, str(exc)) from None
