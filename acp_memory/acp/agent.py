"""The ACP method handlers of one connection: sessions opened, loaded, resumed, listed,
closed and deleted, their modes and options changed, prompts run and cancelled."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol

import anyio

from acp_memory.acp.client import AcpEditor
from acp_memory.acp.content import prompt_input
from acp_memory.acp.errors import (
    claiming,
    creating,
    deleting,
    extra_roots,
    loading,
    model_calls,
    not_loadable,
    workspace,
    writes,
)
from acp_memory.acp.handshake import Handlers, authenticate, initialize, memory_run_updates
from acp_memory.acp.option_changes import set_option, switch_mode
from acp_memory.acp.options import session_state
from acp_memory.acp.schema import (
    CancelNotification,
    CloseSessionRequest,
    DeleteSessionRequest,
    ListSessionsRequest,
    LoadSessionRequest,
    NewSessionRequest,
    PromptRequest,
    ResumeSessionRequest,
    SessionInfo,
    SetConfigOptionRequest,
    SetSessionModeRequest,
)
from acp_memory.acp.updates import (
    commands_update,
    event_update,
    memory_run_message,
    replay_updates,
)
from acp_memory.acp.wire import parse_params
from acp_memory.commands.registry import COMMANDS
from acp_memory.editor import Editor
from acp_memory.engine.events import TurnEvent
from acp_memory.engine.turn import StopReason
from acp_memory.jsonrpc.cancel import cancel_with
from acp_memory.jsonrpc.dispatch import after_reply
from acp_memory.jsonrpc.errors import INVALID_PARAMS, RpcError
from acp_memory.llm.usage import UsageMeter
from acp_memory.mcpclient.specs import BadServerSpec, ServerSpec, specs_from_acp
from acp_memory.runtime.memory_run import run_usage
from acp_memory.runtime.runner import SessionRunner
from acp_memory.runtime.table import ReadOnlySession, refuse_child
from acp_memory.sessions.model import PromptPart
from acp_memory.sessions.store import (
    SESSION_FILE,
    BundleError,
    Session,
    SessionNotFound,
    decode_cursor,
    encode_cursor,
)

LIST_PAGE_SIZE = 50


class Peer(Protocol):
    """The client side of the connection, as the handlers see it."""

    async def notify(self, method: str, params: Any) -> None: ...

    async def request(self, method: str, params: Any) -> Any: ...


class AcpAgent:
    """Holds the sessions of one connection and answers the client's requests."""

    def __init__(self, runner: SessionRunner, first_session_id: str | None = None) -> None:
        self.runner = runner
        # `acp --session-id`: the id the connection's first session/new opens or creates.
        self.first_session_id = first_session_id
        self.cfg = runner.cfg
        self.paths = runner.paths
        self.store = runner.store  # one store: the runner creates child bundles in it too
        self.peer: Peer | None = None
        self.editor: Editor | None = None  # what the client offers, known after initialize
        self.client_capabilities: dict[str, Any] = {}
        # How memory_run updates go out: the config's form until the client asks for its own.
        self.memory_run_updates = self.cfg.acp.memory_run_updates
        # Idle sessions let go (serve() runs it), a reflection's memory_run updates told.
        self.table = runner.session_table(notify_memory=self._memory_run)

    def handlers(self) -> Handlers:
        return {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "session/new": self.new_session,
            "session/load": self.load_session,
            "session/resume": self.resume_session,
            "session/list": self.list_sessions,
            "session/close": self.close_session,
            "session/delete": self.delete_session,
            "session/prompt": self.prompt,
            "session/cancel": self.cancel,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
        }

    # -- lifecycle ---------------------------------------------------------------------

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        answer = await initialize(params)
        self.accept_client(params.get("clientCapabilities") or {})
        return answer

    def accept_client(self, capabilities: dict[str, Any]) -> None:
        """Take what the client advertised at initialize (an agent built after the answer
        is handed it); an unknown memoryRunUpdates form is an RpcError."""
        # Tools use the client's files and terminals only where it advertised them.
        self.memory_run_updates = memory_run_updates(capabilities, self.cfg.acp.memory_run_updates)
        self.client_capabilities = capabilities
        if self.peer is not None:
            self.editor = AcpEditor(self.peer, self.client_capabilities)

    async def authenticate(self, params: dict[str, Any]) -> dict[str, Any]:
        return await authenticate(params)

    def cancel_all(self) -> None:
        """Cancel every running turn and start no more (the input closed)."""
        self.table.stop()

    # -- sessions ----------------------------------------------------------------------

    async def new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        req = parse_params(NewSessionRequest, params)
        cwd = await workspace(req.cwd)
        roots = await extra_roots(req.additional_directories)
        servers = _server_specs(req)
        # Taken before any wait, so that a second session/new never gets the same id; given
        # back if this one fails.
        named, self.first_session_id = self.first_session_id, None
        try:
            if named is not None and (found := await self._named_session(named)) is not None:
                # Opened as session/load opens it, its history replayed once the client has
                # the answer (and so knows the session's id).
                await self._move(found, cwd, roots)
                after_reply(partial(self._replay, found))
                await self._resume(found)
                self.runner.mcp.open(found, servers)
                return {"sessionId": found.id, **self._state(found)}
            stored = [s.stored() for s in req.mcp_servers]
            with creating():
                session = await self.runner.create_session(
                    cwd, mcp_servers=stored, additional_directories=roots, session_id=named
                )
        except BaseException:
            if named is not None:
                self.first_session_id = named
            raise
        self.table.add(session)
        self.runner.mcp.open(session, servers)  # in the background: the answer goes at once
        self._advertise_commands(session.id)
        return {"sessionId": session.id, **self._state(session)}

    async def load_session(self, params: dict[str, Any]) -> dict[str, Any]:
        return await self._reopen(parse_params(LoadSessionRequest, params), replay=True)

    async def resume_session(self, params: dict[str, Any]) -> dict[str, Any]:
        """session/load without the replay: the client still shows the conversation."""
        return await self._reopen(parse_params(ResumeSessionRequest, params), replay=False)

    async def _reopen(
        self, req: LoadSessionRequest | ResumeSessionRequest, *, replay: bool
    ) -> dict[str, Any]:
        """Open a stored session in the request's cwd and roots, its history replayed or not,
        its MCP servers connected in the background."""
        cwd = await workspace(req.cwd)
        roots = await extra_roots(req.additional_directories)
        servers = _server_specs(req)
        session = await self.session(req.session_id)
        await self._move(session, cwd, roots)
        if replay:
            await self._replay(session)
        await self._resume(session)
        self.runner.mcp.open(session, servers)
        return self._state(session)

    async def _named_session(self, session_id: str) -> Session | None:
        """The session `--session-id` names, or None when no bundle has that id yet."""
        try:
            return refuse_child(self._on_a_listed_model(await self.table.get(session_id)))
        except SessionNotFound:
            folder = self.store.root / session_id
            if await anyio.Path(folder).exists():
                # A folder without its session.json, or another session's (a case-insensitive
                # file system finds `Foo` for `foo`): never written over.
                record = folder / SESSION_FILE
                if await anyio.Path(record).exists():
                    raise not_loadable(session_id, f"{record} is another session's") from None
                raise not_loadable(session_id, f"{record} is missing") from None
            return None
        except BundleError as exc:
            raise not_loadable(session_id, exc) from None
        except ReadOnlySession as exc:
            raise RpcError(INVALID_PARAMS, f"--session-id: {exc}") from None

    async def _move(self, session: Session, cwd: str, roots: list[str]) -> None:
        """A loaded session takes the client's cwd and additional roots, the whole list the
        request gave (only session.json changes)."""
        record = session.record
        if (record.cwd, record.additional_directories) == (cwd, roots):
            return
        if not self.table.running(session.id):
            record.cwd, record.additional_directories = cwd, roots
            with writes(session):
                await session.save_record()

    async def _replay(self, session: Session) -> None:
        """The transcript as the session/update notifications a live turn sent."""
        for update in replay_updates(session.messages):
            await self._update(session.id, update)

    async def _resume(self, session: Session) -> None:
        if not session.record.subagent_run:  # a child is only read, never resumed
            await self.runner.session_opened(session, "resume")
            self._advertise_commands(session.id)

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
            SessionInfo(
                session_id=r.id,
                cwd=r.cwd,
                additional_directories=r.additional_directories or None,
                title=r.title or None,
                updated_at=r.updated_at,
            )
            for r in page
        ]
        listing: dict[str, Any] = {"sessions": [i.dump() for i in infos]}
        if len(records) > LIST_PAGE_SIZE:
            listing["nextCursor"] = encode_cursor(page[-1].updated_at, page[-1].id)
        return listing

    async def session(self, session_id: str) -> Session:
        """A session of this process, loading its bundle on first use."""
        with loading(session_id):
            return self._on_a_listed_model(await self.table.get(session_id))

    def _on_a_listed_model(self, session: Session) -> Session:
        """`session`, going on with the default model when the config no longer lists its own."""
        record = session.record
        if not record.subagent_run and record.selected_model_id not in self.cfg.model_ids():
            # The selector offers only listed models: its current value must be one of them.
            # In memory only; the record's next save writes it.
            record.selected_model_id = self.cfg.default_model_id()
        return session

    async def writable_session(self, session_id: str) -> Session:
        """A session the client may prompt or change: never a subagent's child session."""
        try:
            return refuse_child(await self.session(session_id))
        except ReadOnlySession as exc:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: sessionId: {exc} (load it to read its transcript)",
            ) from None

    async def close_session(self, params: dict[str, Any]) -> dict[str, Any]:
        """As session/cancel, then what the session holds let go; answered once its memory
        runs ended (at most exit_wait_seconds) and its pool stopped. A later load opens it."""
        req = parse_params(CloseSessionRequest, params)
        session = await self.session(req.session_id)
        await self._held_for(session, partial(self.runner.close_session, session,
                                              self._memory_run))
        self.table.discard(session)
        return {}

    async def delete_session(self, params: dict[str, Any]) -> dict[str, Any]:
        """As session/cancel, then the bundle removed with its child sessions and task
        records, its running tasks stopped first; never a child session on its own."""
        req = parse_params(DeleteSessionRequest, params)
        session = await self.session(req.session_id)
        try:
            refuse_child(session)
        except ReadOnlySession as exc:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: sessionId: {exc}; it goes when its parent is deleted",
            ) from None
        with deleting(session):
            await self._held_for(session, partial(self.runner.delete_session, self.table, session))
        return {}

    async def _held_for(self, session: Session, work: Callable[[], Awaitable[None]]) -> None:
        """The session's running turn cancelled and ended, then `work` done while no prompt
        can start."""
        await self.table.settle(session.id)
        with claiming():
            self.table.claim(session)
        try:
            await work()
        finally:
            self.table.release(session)

    def close(self) -> None:
        """Release every session's bundle for other processes (the connection ended)."""
        self.table.close()

    # -- modes and options -------------------------------------------------------------

    async def set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        req = parse_params(SetSessionModeRequest, params)
        session = await self.writable_session(req.session_id)
        await switch_mode(
            session, req.mode_id, self.cfg.model_ids(), self._memory_option,
            partial(self._update, session.id),
        )
        return {}

    async def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        req = parse_params(SetConfigOptionRequest, params)
        session = await self.writable_session(req.session_id)
        options = await set_option(
            session, req.config_id, req.value, self.cfg.model_ids(), self._memory_option,
            partial(self._update, session.id),
        )
        return {"configOptions": options}

    def _state(self, session: Session) -> dict[str, Any]:
        return session_state(session.record, self.cfg.model_ids(), self._memory_option(session))

    def _memory_option(self, session: Session) -> bool | None:
        """The memory switch's value; None in a child session, which has no memory runs."""
        return None if session.record.subagent_run else self.runner.memory_enabled(session)

    # -- turns -------------------------------------------------------------------------

    async def prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        req = parse_params(PromptRequest, params)
        session = await self.writable_session(req.session_id)
        user_input = prompt_input(list(req.prompt))
        with claiming():
            scope = self.table.claim(session)
        # From here a $/cancel_request naming this prompt ends its turn as session/cancel
        # does, answered `cancelled`; before, the prompt never ran and answers -32800.
        cancel_with(scope.cancel)
        stop: StopReason = "cancelled"
        meter = UsageMeter()
        runs: list[dict[str, Any]] = []  # the turn's memory_run updates
        seen = (session.record.title, session.record.updated_at)
        try:
            with scope:
                stop = await self._run_turn(session, user_input, meter, runs)
        finally:
            self.table.release(session)
            await self._info_update(session, seen)
        answer = {"stopReason": "cancelled" if scope.cancel_called else stop}
        return {**answer, **turn_usage(meter, runs[-1] if runs else None)}

    async def _run_turn(
        self,
        session: Session,
        user_input: str | list[PromptPart],
        meter: UsageMeter,
        runs: list[dict[str, Any]],
    ) -> StopReason:
        """The turn; meter counts its model calls, runs gets its memory_run updates."""

        async def emit(event: TurnEvent) -> None:
            await self._update(session.id, event_update(event))

        async def notify_memory(update: dict[str, Any]) -> None:
            runs.append(update)
            await self._memory_run(session.id, update)

        with model_calls(), writes(session):
            return await self.runner.run_turn(
                session, user_input, emit, editor=self.editor, notify_memory=notify_memory,
                meter=meter,
            )

    async def _info_update(self, session: Session, seen: tuple[str, str]) -> None:
        """session_info_update once a turn recorded something: its updatedAt (as session/list
        gives it), and the title when this turn gave the session its first."""
        title, updated_at = session.record.title, session.record.updated_at
        if (title, updated_at) == seen:
            return
        update = {"sessionUpdate": "session_info_update", "updatedAt": updated_at}
        if title != seen[0]:
            update["title"] = title
        await self._update(session.id, update)

    async def cancel(self, params: dict[str, Any]) -> None:
        req = parse_params(CancelNotification, params)
        self.table.cancel(req.session_id)

    def _advertise_commands(self, session_id: str) -> None:
        """The built-in slash commands, sent once the answer is out: an editor drops updates
        for a session it does not know yet."""
        update = commands_update(COMMANDS)
        after_reply(partial(self._update, session_id, update))

    async def _memory_run(self, session_id: str, update: dict[str, Any]) -> None:
        """A memory_run update in the form the client asked for at initialize, else the one
        acp.memory_run_updates says: a session/update variant (v1 clients drop what they do
        not know), an extension notification, or nothing."""
        message = memory_run_message(self.memory_run_updates, session_id, update)
        if message is not None and self.peer is not None:
            await self.peer.notify(*message)

    async def _update(self, session_id: str, update: dict[str, Any]) -> None:
        if self.peer is not None:
            await self.peer.notify("session/update", {"sessionId": session_id, "update": update})


def turn_usage(meter: UsageMeter, memory_run: dict[str, Any] | None) -> dict[str, Any]:
    """The prompt answer's `usage` (the turn's own calls) and, in `_meta`, its memory run's:
    a second conversation, counted apart (memory_run: the turn's last memory_run update)."""
    usage: dict[str, Any] = {"usage": meter.as_json()}
    if (run := run_usage(memory_run)) is not None:
        usage["_meta"] = {"acpMemory": {"memoryRun": run}}
    return usage


def _server_specs(req: NewSessionRequest) -> list[ServerSpec]:
    """The request's mcpServers as specs; -32602 naming the first that cannot start."""
    try:
        return specs_from_acp(s.dump() for s in req.mcp_servers)
    except BadServerSpec as exc:
        raise RpcError(INVALID_PARAMS, f"Invalid params: mcpServers: {exc}") from None
