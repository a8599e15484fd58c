"""Running user turns of sessions, for every surface: the ACP agent, the HTTP server and print
mode alike.

The runner owns what outlives a single prompt: the task group that background work of every
session belongs to (closed when the surface stops), and the services each session's tools get.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio
from anyio.abc import TaskGroup

from acp_memory.clock import Clock
from acp_memory.config import Config, Paths
from acp_memory.editor import Editor
from acp_memory.engine.events import AgentText, Emit, ToolCallFinished
from acp_memory.engine.turn import (
    PlainContext,
    StopReason,
    TurnContextSource,
    TurnEngine,
    TurnSetup,
)
from acp_memory.hooks.surface import Hooks
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.usage import UsageMeter
from acp_memory.memory.inline import session_memory
from acp_memory.memory.review import TurnQuestions, reviewer_for
from acp_memory.runtime.mcp_service import McpService
from acp_memory.runtime.memory_agent import memory_model_warnings
from acp_memory.runtime.memory_run import MemoryRun, NotifyMemory
from acp_memory.runtime.memory_service import MemoryHost, MemoryService
from acp_memory.runtime.pool_context import PoolContext
from acp_memory.runtime.reflection import NotifySession, Reflection
from acp_memory.runtime.subagents import Subagents
from acp_memory.runtime.table import SessionTable
from acp_memory.runtime.usage import UsageReports
from acp_memory.sessions.model import ImagePart, PromptPart, TranscriptMessage, prompt_text
from acp_memory.sessions.store import Session, SessionStore
from acp_memory.tasks.pool import PoolSettings, TaskPool
from acp_memory.tasks.process import KILL_GRACE_SECONDS, groups_killed_on_termination
from acp_memory.tasks.reaper import is_subreaper, reap_adopted_forever
from acp_memory.tools.base import ToolContext
from acp_memory.tools.permissions import GRANTS_FILE, PermissionGate
from acp_memory.tools.registry import ToolSet

log = logging.getLogger(__name__)


class ImagesRefused(ValueError):
    """A prompt with images for a model whose config does not say `vision: true`."""

    def __init__(self, model_id: str) -> None:
        super().__init__(
            f"model {model_id} does not take images (set vision: true on its models[] entry "
            "if it does)"
        )
        self.model_id = model_id


class SlashCommands(Protocol):
    """The built-in commands as the runner runs them, ahead of any turn work."""

    async def reply(
        self,
        runner: SessionRunner,
        session: Session,
        text: str,
        editor: Editor | None,
        notify_memory: NotifyMemory | None,
        emit: Emit,
    ) -> str | None:
        """The reply of the command that text names, or None for an ordinary prompt; emit
        is the turn's stream (a memory run's review updates go there)."""
        ...


class SessionRunner:
    """Turns for the sessions of one surface, and the owner of their background work."""

    def __init__(
        self,
        cfg: Config,
        paths: Paths,
        engine: TurnEngine,
        model_for: Callable[[str], ModelHandle],
        child_model_for: Callable[[str], ModelHandle] | None = None,
        *,
        hooks: Hooks,
        commands: SlashCommands | None = None,
    ) -> None:
        self.cfg = cfg
        # Handed in by the composition root (build.py): the commands stand on the runner,
        # and which hooks run is the config's business, not the runner's.
        self.hooks = hooks
        self.commands = commands
        self.paths = paths
        self.engine = engine
        self.model_for = model_for
        # The memory child's models: never waiting for a quota reset (top-level turns only).
        self.child_model_for = child_model_for or model_for
        self.store = SessionStore(paths.sessions_dir)
        self._owner: TaskGroup | None = None
        self._pools: dict[str, TaskPool] = {}
        # The cwd whose indexes each open session had brought up to date: once per opening,
        # not per turn (dropped when the session is let go or closed, and at the block's end).
        self._indexed: dict[str, str] = {}
        self.kill_grace_seconds = KILL_GRACE_SECONDS  # SIGTERM to SIGKILL; tests shorten it
        # The clock the bounds read (run timeouts, the turn's wait, the exit wait): tests
        # replace it, so the memory service reads it through its host at every use.
        self.clock = Clock()
        self.usage = UsageReports()  # the usage_update of the main agent's answers
        # Each session's MCP servers, tasks of the owner group like the pools.
        self.mcp = McpService(cfg, owner=lambda: self.owner, clock=lambda: self.clock)
        # The memory runs, their bounds and the search indexes; memory on or off (the notes
        # routes share the indexes).
        self.memory = MemoryService(
            cfg,
            paths,
            engine,
            MemoryHost(
                pool_for=self.pool_for,
                create_child=self.store.create,
                child_hooks=self.hooks.for_child,
                model_for=lambda model_id: self.child_model_for(model_id),
                owner=lambda: self.owner,
                clock=lambda: self.clock,
            ),
        )
        # Reflection runs: a session let go (the table) or closed (close_session).
        self.reflection = Reflection(self.memory, self.memory_enabled)

    @property
    def owner(self) -> TaskGroup:
        """The task group background work belongs to; only inside `running()`."""
        if self._owner is None:
            raise RuntimeError("the session runner is not running")
        return self._owner

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[SessionRunner]:
        """Own the background work of every session until the block ends, then stop it."""
        for line in memory_model_warnings(self.cfg):
            log.warning("%s", line)  # once, at the start of the surface
        try:
            with groups_killed_on_termination():
                async with anyio.create_task_group() as tg:
                    self._owner = tg
                    if is_subreaper():  # what it adopted is its own to reap
                        tg.start_soon(reap_adopted_forever)
                    try:
                        yield self
                    finally:
                        # A persist cut mid-way loses its note: running memory runs get a
                        # bounded grace before the pools stop (EOF, SIGTERM, SIGINT alike).
                        with anyio.CancelScope(shield=True):
                            await self.memory.drain()
                        # Each task records why it stopped, kills its process group and writes
                        # its record, shielded, before the group below lets the block end;
                        # the group stays the owner until then, for that bookkeeping.
                        for pool in self._pools.values():
                            pool.close_nowait("stopped: the agent stopped")
                        self._pools.clear()
                        self.mcp.close()  # each server's process stopped, shielded
                        tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # Background tasks keep their failures to themselves, so a group holds the one
            # error of the block: the caller handles it as it would without the group.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            self._owner = None
            self._indexed.clear()
            self.memory.close()

    async def create_session(
        self,
        cwd: str,
        *,
        model_id: str | None = None,
        mode: str = "agent",
        mcp_servers: list[dict[str, Any]] | None = None,
        additional_directories: Sequence[str] = (),
        messages: Sequence[TranscriptMessage] = (),
        session_id: str | None = None,
    ) -> Session:
        """A new top-level session bundle (off the event loop), with its inline memory
        snapshot when memory.inline is on, starting from `messages` (an earlier conversation),
        under `session_id` when the caller names it; every surface makes its sessions here.
        Raises OSError when the bundle cannot be written."""

        def create() -> Session:
            return self.store.create(
                cwd=cwd,
                model_id=model_id or self.cfg.default_model_id(),
                mode=mode,
                mcp_servers=mcp_servers,
                additional_directories=additional_directories,
                messages=messages,
                session_id=session_id,
                inline_memory=session_memory(self.cfg, self.paths, cwd),
            )

        session = await anyio.to_thread.run_sync(create)
        if note := self.cfg.take_no_file_note():
            log.warning("%s", note)  # once: which model a config-less run picked, and why
        try:
            await self.session_opened(session, "startup")
        except BaseException:
            # Never handed out (a session/new cancelled in its SessionStart hooks): the
            # bundle stays, let go for whoever loads it.
            session.close()
            raise
        return session

    async def session_opened(self, session: Session, source: Literal["startup", "resume"]) -> None:
        """A top-level session opened in this process (made, loaded, or first prompted): its
        roots' indexes brought up to date in the background (when its memory option is on),
        its SessionStart hooks run."""
        cwd = session.record.cwd
        if self.memory_enabled(session) and self._indexed.get(session.id) != cwd:
            self.memory.open_indexes(cwd)
            self.memory.open_shared(session.id, cwd)
            self._indexed[session.id] = cwd
        await self.hooks.start(session, source)

    def tool_context(
        self, session: Session, editor: Editor | None = None, tools: ToolSet | None = None
    ) -> ToolContext:
        """What the tools of `session` may reach in this surface; `tools` is the session's
        own set (a child's children get at most that)."""
        record = session.record
        pool = self.pool_for(session) if self._owner is not None else None
        agents = None
        if pool is not None:
            tool_set = tools or self.engine.tools_for(session)
            agents = Subagents(self, session, pool, tool_set, editor)
        return ToolContext(
            session.id,
            Path(record.cwd),
            record.mode,
            roots=tuple(Path(folder) for folder in record.additional_directories),
            bundle=session.dir,
            editor=editor,
            permissions=PermissionGate(self.cfg.tools, session.dir / GRANTS_FILE, editor),
            tasks=pool,
            agents=agents,
            output_limit=self.cfg.tools.output_limits.tool_output_chars,
        )

    def turn_context(self, session: Session) -> TurnContextSource:
        """Where the runtime state of the session's next turn comes from."""
        if self._owner is None:
            return PlainContext()
        return PoolContext(self.pool_for(session))

    def session_table(
        self,
        in_use: Callable[[str], bool] | None = None,
        notify_memory: NotifySession | None = None,
    ) -> SessionTable:
        """A front end's table of open sessions, letting idle ones go as `sessions:` says
        (their pools closed here, a reflection run first when one is due, its memory_run
        updates to notify_memory); a session whose pool runs a task, or that in_use names,
        is in use."""

        def busy(session_id: str) -> bool:
            pool = self._pools.get(session_id)
            return (pool is not None and pool.busy) or (in_use is not None and in_use(session_id))

        return SessionTable(
            self.store,
            clock=self.clock,
            idle_seconds=self.cfg.sessions.idle_seconds,
            max_open=self.cfg.sessions.max_open,
            in_use=busy,
            on_release=self.close_pool,
            on_idle=lambda session: self.reflection.on_idle(session, notify_memory),
            on_load=lambda session: self.reflection.on_load(session, notify_memory),
        )

    def pool_for(self, session: Session) -> TaskPool:
        """The background pool of `session`, made on first use; only inside `running()`."""
        pool = self._pools.get(session.id)
        if pool is None or pool.closed:
            pool = self._pools[session.id] = self._new_pool(session)
        return pool

    def pool_view(self, session: Session) -> TaskPool:
        """The session's pool when it has one here, else one for this call alone and never
        kept: a session only read (its tasks are read from the bundle) holds nothing."""
        pool = self._pools.get(session.id)
        return pool if pool is not None and not pool.closed else self._new_pool(session)

    def _new_pool(self, session: Session) -> TaskPool:
        settings = PoolSettings.from_config(
            self.cfg.tools, kill_grace_seconds=self.kill_grace_seconds
        )
        return TaskPool(self.owner, session.id, session.dir, settings, self.clock)

    def memory_enabled(self, session: Session) -> bool:
        """The session's `memory` option: memory.enable (as it is now), unless the session
        chose otherwise (its session.json's memoryEnabled)."""
        chosen = session.record.memory_enabled
        return self.cfg.memory.enable if chosen is None else chosen

    def memory_due(self, session: Session) -> bool:
        """Whether a user turn of `session` starts a memory run: its memory option on, a
        surface with a pool, and an ordinary session (a child, spawned or a memory run,
        never gets one)."""
        return (
            self._owner is not None
            and not session.record.subagent_run
            and self.memory_enabled(session)
        )

    def close_pool(self, session_id: str, reason: str = "stopped: the session closed") -> None:
        """Stop the session's background tasks; their cleanup (process groups killed,
        records written) ends in the owner group, which `running()` waits for."""
        pool = self._pools.pop(session_id, None)
        if pool is not None:
            pool.close_nowait(reason)
        self.mcp.release(session_id)  # started again by its next turn
        self._indexed.pop(session_id, None)  # opened again by its next opening
        self.memory.shared.closed(session_id)
        self.reflection.forget(session_id)

    async def close_session(
        self, session: Session, notify_memory: NotifySession | None = None, *, reflect: bool = True
    ) -> None:
        """Free what `session` holds in this surface once its turn has ended (a client closed
        it): its reflection run started when due (reflect), its memory runs waited for
        (MemoryService.drain, bounded by exit_wait_seconds), then its pool stopped and its
        tasks ended. What else a session holds while open (its MCP servers) is let go here
        too."""
        if reflect and self._owner is not None:
            await self.reflection.at_close(session, notify_memory)
        await self.memory.drain(session.id)
        self._indexed.pop(session.id, None)
        self.memory.shared.closed(session.id)
        self.reflection.forget(session.id)
        pool = self._pools.pop(session.id, None)
        if pool is not None:
            await pool.aclose("stopped: the session was closed")
        await self.mcp.forget(session.id)

    async def delete_session(self, table: SessionTable, session: Session) -> None:
        """Delete a top-level session's bundle, its child sessions and task records with it,
        once its running tasks (memory runs included) have stopped; every surface deletes
        here, holding the session's claim (table.claim) so that no turn starts meanwhile.
        Raises BundleBusy while another process writes it, OSError when it cannot go."""
        await anyio.to_thread.run_sync(session.lock.acquire)
        await self.pool_view(session).aclose("stopped: the session was deleted")
        # Nothing is left running: frees what it holds (no reflection: the bundle goes).
        await self.close_session(session, reflect=False)
        try:
            await anyio.to_thread.run_sync(shutil.rmtree, session.dir)
        finally:
            table.discard(session)

    async def run_turn(
        self,
        session: Session,
        prompt: str | Sequence[PromptPart],
        emit: Emit,
        *,
        editor: Editor | None = None,
        notify_memory: NotifyMemory | None = None,
        meter: UsageMeter | None = None,
    ) -> StopReason:
        """One user turn of an ordinary session on its selected model, with its memory run
        when memory is on; notify_memory hears the run's memory_run updates, meter counts
        the turn's own model calls. A prompt that names a built-in command (/help) runs it
        instead: no turn, no automatic memory run. A prompt holding images comes as its parts.

        Raises ImagesRefused for images to a model without `vision`, before anything is
        recorded; UnknownModelError for a model id no provider serves, LLMError when the model
        call fails, BundleBusy or OSError when the bundle cannot be written.
        """
        text = prompt_text(prompt)  # what commands, hooks and the memory run read
        if not isinstance(prompt, str) and any(isinstance(p, ImagePart) for p in prompt):
            model_id = session.record.selected_model_id
            if not self.model_for(model_id).config.vision:
                raise ImagesRefused(model_id)
        await self.session_opened(session, "resume")  # once: a session new to this process
        commands = self.commands
        if commands is not None and (
            reply := await commands.reply(self, session, text, editor, notify_memory, emit)
        ) is not None:
            await emit(AgentText(reply))
            return "end_turn"
        # The main agent's calls: counted in the caller's meter, each answer a usage_update.
        usage = self.usage.turn(session, meter or UsageMeter(), emit)
        model = usage.metered(self.model_for(session.record.selected_model_id))
        context = self.turn_context(session)
        memory: MemoryRun | None = None
        if self.memory_due(session):
            # Started only once the UserPromptSubmit hooks accepted the prompt (engine.run).
            memory = MemoryRun(self.memory, session, text, notify_memory, context,
                               self.review_questions(session, editor, emit))
            context = memory
        # The MCP servers' tools are the main agent's alone: children get at most `tools`.
        tools = self.engine.tools_for(session)
        server_tools = await self.mcp.turn_tools(session, emit)
        setup = TurnSetup(
            tools=ToolSet([*tools, *server_tools], tools.label) if server_tools else None,
            tool_context=self.tool_context(session, editor, tools=tools),
            context=context,
            hooks=await self.hooks.for_turn(session),
        )
        try:
            return await self.engine.run(session, prompt, model, emit, setup)
        finally:
            if memory is not None:
                # Before the prompt's answer: the finished update of a settled run.
                with anyio.CancelScope(shield=True):
                    await memory.end_turn()
            await usage.keep()  # the session's cost, on disk (shielded as every write)

    def review_questions(
        self, session: Session, editor: Editor | None, emit: Emit
    ) -> TurnQuestions | None:
        """With memory.review: ask, the review questions of a turn of session: asked through
        its editor, each one's end told on the turn's stream; None when review is off."""
        if self.cfg.memory.review != "ask":
            return None

        async def tell(call_id: str, status: Literal["completed", "failed"], text: str) -> None:
            await emit(ToolCallFinished(call_id, status, text))

        grants = PermissionGate(self.cfg.tools, session.dir / GRANTS_FILE, None)
        return TurnQuestions(session.id, reviewer_for(editor), grants, tell)

