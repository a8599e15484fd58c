"""The ACP method handlers: sessions, modes, prompts and cancellation."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import anyio

from acp_memory import __version__
from acp_memory.acp.client import AcpEditor
from acp_memory.acp.content import prompt_text
from acp_memory.acp.schema import (
    PROTOCOL_VERSION,
    AuthenticateRequest,
    CancelNotification,
    InitializeRequest,
    ListSessionsRequest,
    LoadSessionRequest,
    NewSessionRequest,
    PromptRequest,
    SelectConfigOption,
    SelectOption,
    SessionInfo,
    SessionMode,
    SessionModeState,
    SetConfigOptionRequest,
    SetSessionModeRequest,
    initialize_response,
)
from acp_memory.acp.updates import commands_update, event_update, replay_updates
from acp_memory.acp.wire import parse_params
from acp_memory.commands.registry import COMMANDS
from acp_memory.engine.events import TurnEvent
from acp_memory.engine.turn import StopReason
from acp_memory.jsonrpc.connection import after_reply
from acp_memory.jsonrpc.errors import INTERNAL_ERROR, INVALID_PARAMS, RpcError
from acp_memory.llm.registry import UnknownModelError
from acp_memory.llm.types import LLMError
from acp_memory.sessions.lock import BundleBusy
from acp_memory.sessions.runner import SessionRunner
from acp_memory.sessions.store import (
    BundleError,
    Session,
    SessionNotFound,
    decode_cursor,
    encode_cursor,
)
from acp_memory.tools.base import Editor

log = logging.getLogger(__name__)

SESSION_BUSY = -32001
# ACP's own code for an unknown session (or other resource).
RESOURCE_NOT_FOUND = -32002
LIST_PAGE_SIZE = 50
MODES = {
    "agent": ("Agent", "Reads and changes the workspace with every tool."),
    "plan": ("Plan", "Reads and answers with a plan; changes nothing."),
    "ask": ("Ask", "Answers questions; read-only."),
}


MEMORY_RUN_METHOD = "_acp_memory/memory_run"


class Peer(Protocol):
    """The client side of the connection, as the handlers see it."""

    async def notify(self, method: str, params: Any) -> None: ...

    async def request(self, method: str, params: Any) -> Any: ...


class AcpAgent:
    """Holds the sessions of one connection and answers the client's requests."""

    def __init__(self, runner: SessionRunner) -> None:
        self.runner = runner
        self.cfg = runner.cfg
        self.paths = runner.paths
        self.store = runner.store  # one store: the runner creates child bundles in it too
        self.peer: Peer | None = None
        self.editor: Editor | None = None  # what the client offers, known after initialize
        self.client_capabilities: dict[str, Any] = {}
        self._sessions: dict[str, Session] = {}
        self._turns: dict[str, anyio.CancelScope] = {}

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], Awaitable[Any]]]:
        return {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "session/new": self.new_session,
            "session/load": self.load_session,
            "session/list": self.list_sessions,
            "session/prompt": self.prompt,
            "session/cancel": self.cancel,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
        }

    # -- lifecycle ---------------------------------------------------------------------

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        answer = await initialize(params)
        # Tools use the client's files and terminals only where it advertised them.
        self.client_capabilities = params.get("clientCapabilities") or {}
        if self.peer is not None:
            self.editor = AcpEditor(self.peer, self.client_capabilities)
        return answer

    async def authenticate(self, params: dict[str, Any]) -> dict[str, Any]:
        return await authenticate(params)

    def cancel_all(self) -> None:
        """Cancel every running turn (the input closed)."""
        for scope in self._turns.values():
            scope.cancel()

    # -- sessions ----------------------------------------------------------------------

    async def new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        req = parse_params(NewSessionRequest, params)
        cwd = await _workspace(req.cwd)
        servers = [s.stored() for s in req.mcp_servers]
        try:
            session = await self.runner.create_session(cwd, mcp_servers=servers)
        except OSError as exc:
            raise RpcError(INTERNAL_ERROR, f"cannot create the session: {_os_error(exc)}") from None
        self._sessions[session.id] = session
        self._advertise_commands(session.id)
        return {"sessionId": session.id, **self._session_state(session)}

    async def load_session(self, params: dict[str, Any]) -> dict[str, Any]:
        req = parse_params(LoadSessionRequest, params)
        cwd = await _workspace(req.cwd)
        session = await self.session(req.session_id)
        if session.record.cwd != cwd and req.session_id not in self._turns:
            session.record.cwd = cwd
            async with _writes(session):
                await session.save_record()  # only session.json changed
        for update in replay_updates(session.messages):
            await self._update(session.id, update)
        if not session.record.subagent_run:  # a child is only read, never resumed
            await self.runner.hooks.start(session, "resume")
            self._advertise_commands(session.id)
        return self._session_state(session)

    async def list_sessions(self, params: dict[str, Any]) -> dict[str, Any]:
        req = parse_params(ListSessionsRequest, params)
        try:
            after = decode_cursor(req.cursor) if req.cursor else None
        except ValueError:
            raise RpcError(
                INVALID_PARAMS, "Invalid params: cursor: not a cursor we issued"
            ) from None
        records = await anyio.to_thread.run_sync(
            partial(self.store.list, cwd=req.cwd), abandon_on_cancel=True
        )
        # A keyset cursor: sessions updated between two pages neither repeat nor push others
        # past the page boundary.
        if after is not None:
            records = [r for r in records if (r.updated_at, r.id) < after]
        page = records[:LIST_PAGE_SIZE]
        infos = [
            SessionInfo(session_id=r.id, cwd=r.cwd, title=r.title or None, updated_at=r.updated_at)
            for r in page
        ]
        listing: dict[str, Any] = {"sessions": [i.dump() for i in infos]}
        if len(records) > LIST_PAGE_SIZE:
            listing["nextCursor"] = encode_cursor(page[-1].updated_at, page[-1].id)
        return listing

    async def session(self, session_id: str) -> Session:
        """A session of this process, loading its bundle on first use."""
        if session := self._sessions.get(session_id):
            return session
        try:
            session = await anyio.to_thread.run_sync(self.store.load, session_id)
        except SessionNotFound:
            raise RpcError(RESOURCE_NOT_FOUND, f"Session not found: {session_id}") from None
        except BundleError as exc:
            raise RpcError(
                RESOURCE_NOT_FOUND, f"Session {session_id} cannot be loaded: {exc}"
            ) from None
        # Two requests may have loaded it at once; the first one in wins.
        return self._sessions.setdefault(session_id, session)

    async def writable_session(self, session_id: str) -> Session:
        """A session the client may prompt or change: never a subagent's child session."""
        session = await self.session(session_id)
        record = session.record
        if record.subagent_run:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: sessionId: {session_id} is a child session that "
                f"{record.subagent_name or 'a subagent'} ran for {record.parent_session_id}; "
                "it is read-only (load it to read its transcript)",
            )
        return session

    def close(self) -> None:
        """Release every session's bundle for other processes (the connection ended)."""
        for session in self._sessions.values():
            self.runner.close_pool(session.id)  # its tasks end with it, process groups and all
            session.close()

    # -- modes and options -------------------------------------------------------------

    async def set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        req = parse_params(SetSessionModeRequest, params)
        session = await self.writable_session(req.session_id)
        await self._switch_mode(session, req.mode_id)
        return {}

    async def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        req = parse_params(SetConfigOptionRequest, params)
        session = await self.writable_session(req.session_id)
        value = str(req.value)
        if req.config_id == "mode":
            await self._switch_mode(session, value)
        elif req.config_id == "model":
            if value not in self.cfg.model_ids():
                raise RpcError(
                    INVALID_PARAMS,
                    f"Invalid params: value: unknown model {value!r}; "
                    f"choose one of {', '.join(self.cfg.model_ids())}",
                )
            session.record.selected_model_id = value
            async with _writes(session):
                await session.save_record()  # only session.json changed
        else:
            raise RpcError(
                INVALID_PARAMS, f"Invalid params: configId: unknown option {req.config_id!r}"
            )
        return {"configOptions": self._session_state(session)["configOptions"]}

    async def _switch_mode(self, session: Session, mode_id: str) -> None:
        if mode_id not in MODES:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: modeId: unknown mode {mode_id!r}; use agent, plan or ask",
            )
        if session.record.mode != mode_id:
            session.record.mode = mode_id
            async with _writes(session):
                await session.save_record()  # only session.json changed
        await self._update(
            session.id, {"sessionUpdate": "current_mode_update", "currentModeId": mode_id}
        )
        # Clients that show the config options rather than the modes see the switch too.
        options = self._session_state(session)["configOptions"]
        await self._update(
            session.id, {"sessionUpdate": "config_option_update", "configOptions": options}
        )

    def _session_state(self, session: Session) -> dict[str, Any]:
        record = session.record
        modes = SessionModeState(
            current_mode_id=record.mode,
            available_modes=[
                SessionMode(id=mode_id, name=name, description=desc)
                for mode_id, (name, desc) in MODES.items()
            ],
        )
        options = [
            SelectConfigOption(
                id="mode",
                name="Mode",
                category="mode",
                current_value=record.mode,
                options=[
                    SelectOption(value=m, name=name, description=desc)
                    for m, (name, desc) in MODES.items()
                ],
            ),
            SelectConfigOption(
                id="model",
                name="Model",
                category="model",
                current_value=record.selected_model_id,
                options=[SelectOption(value=m, name=m) for m in self.cfg.model_ids()],
            ),
        ]
        return {"modes": modes.dump(), "configOptions": [o.dump() for o in options]}

    # -- turns -------------------------------------------------------------------------

    async def prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        req = parse_params(PromptRequest, params)
        session = await self.writable_session(req.session_id)
        text = prompt_text(list(req.prompt))
        if session.id in self._turns:
            raise RpcError(
                SESSION_BUSY,
                f"Session {session.id} is already running a prompt; "
                "wait for its answer or send session/cancel first",
            )
        scope = self._turns[session.id] = anyio.CancelScope()
        stop: StopReason = "cancelled"
        try:
            with scope:
                stop = await self._run_turn(session, text)
        finally:
            del self._turns[session.id]
        return {"stopReason": "cancelled" if scope.cancel_called else stop}

    async def _run_turn(self, session: Session, text: str) -> StopReason:
        async def emit(event: TurnEvent) -> None:
            await self._update(session.id, event_update(event))

        async def notify_memory(update: dict[str, Any]) -> None:
            await self._memory_run(session.id, update)

        try:
            async with _writes(session):
                return await self.runner.run_turn(
                    session, text, emit, editor=self.editor, notify_memory=notify_memory
                )
        except UnknownModelError as exc:
            raise RpcError(INTERNAL_ERROR, str(exc)) from None
        except LLMError as exc:
            # The turn ends; the editor is told why, with the provider's status and words.
            data = {"status": exc.status, "provider": exc.provider, "afterOutput": exc.after_output}
            raise RpcError(INTERNAL_ERROR, f"model call failed: {exc}", data) from None

    async def cancel(self, params: dict[str, Any]) -> None:
        req = parse_params(CancelNotification, params)
        scope = self._turns.get(req.session_id)
        if scope is not None:
            scope.cancel()

    def _advertise_commands(self, session_id: str) -> None:
        """The built-in slash commands, sent once the answer is out: an editor drops updates
        for a session it does not know yet."""
        update = commands_update(COMMANDS)
        after_reply(partial(self._update, session_id, update))

    async def _memory_run(self, session_id: str, update: dict[str, Any]) -> None:
        """A memory_run update the way acp.memory_run_updates says: a session/update variant
        (v1 clients drop what they do not know), an extension notification, or nothing."""
        how = self.cfg.acp.memory_run_updates
        if how == "off" or self.peer is None:
            return
        if how == "ext_notification":
            await self.peer.notify(MEMORY_RUN_METHOD, {"sessionId": session_id, **update})
        else:
            await self._update(session_id, {"sessionUpdate": "memory_run", **update})

    async def _update(self, session_id: str, update: dict[str, Any]) -> None:
        if self.peer is not None:
            await self.peer.notify("session/update", {"sessionId": session_id, "update": update})


async def initialize(params: dict[str, Any]) -> dict[str, Any]:
    """The answer to `initialize`: the version we both speak, and what this agent can do."""
    req = parse_params(InitializeRequest, params)
    version = min(req.protocol_version, PROTOCOL_VERSION)
    return initialize_response(version, "acp-memory", __version__)


async def authenticate(params: dict[str, Any]) -> dict[str, Any]:
    """No authentication is needed: provider keys come from the config."""
    parse_params(AuthenticateRequest, params)
    return {}


def unconfigured_handlers(problem: str) -> dict[str, Callable[[dict[str, Any]], Awaitable[Any]]]:
    """An agent whose config failed to load: it answers initialize, so the editor connects
    and shows `problem` on the first session request, rather than a bare "server exited"."""

    async def refuse(params: dict[str, Any]) -> dict[str, Any]:
        raise RpcError(INTERNAL_ERROR, f"acp-memory cannot start: {problem}")

    async def ignore(params: dict[str, Any]) -> None:
        return None

    session_methods = ("new", "load", "list", "prompt", "set_mode", "set_config_option")
    return {
        "initialize": initialize,
        "authenticate": authenticate,
        "session/cancel": ignore,
        **{f"session/{name}": refuse for name in session_methods},
    }


async def _workspace(cwd: str) -> str:
    """The session's cwd, refused unless it is an absolute path to an existing folder."""
    if not Path(cwd).is_absolute():
        raise RpcError(
            INVALID_PARAMS, f"Invalid params: cwd: must be an absolute path, got {cwd!r}"
        )
    if not await anyio.Path(cwd).is_dir():
        raise RpcError(INVALID_PARAMS, f"Invalid params: cwd: no such folder: {cwd}")
    return cwd


@asynccontextmanager
async def _writes(session: Session) -> AsyncIterator[None]:
    """A bundle that cannot be written becomes an error the editor shows, never a traceback."""
    try:
        yield
    except BundleBusy as exc:
        raise RpcError(SESSION_BUSY, f"Session {session.id} is busy: {exc}") from None
    except OSError as exc:
        log.warning("session %s: %s", session.id, _os_error(exc))
        raise RpcError(
            INTERNAL_ERROR, f"Session {session.id} cannot be saved: {_os_error(exc)}"
        ) from None


def _os_error(exc: OSError) -> str:
    return f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
