"""The hooks of one surface (the ACP agent, print mode): the SessionHooks of each session,
and what SessionStart printed until the session's first turn takes it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from acp_memory.config import Config
from acp_memory.hooks.events import SessionHooks, Subagent
from acp_memory.hooks.table import load_table
from acp_memory.sessions.store import Session


class Hooks:
    """Hands out each session's hooks; None wherever no hook is configured."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._started: set[str] = set()
        self._opening: dict[str, list[str]] = {}  # SessionStart output awaiting a first turn

    async def for_session(
        self, session: Session, subagent: Subagent | None = None
    ) -> SessionHooks | None:
        """The session's hooks, read afresh (the project's file may have changed)."""
        table = await load_table(self.cfg, Path(session.record.cwd))
        return SessionHooks(table, session, subagent) if table is not None else None

    async def start(self, session: Session, source: Literal["startup", "resume"]) -> None:
        """SessionStart of a top-level session, once in this process; what it printed waits
        for the session's first turn."""
        if session.id in self._started:
            return
        self._started.add(session.id)
        hooks = await self.for_session(session)
        if hooks is not None and (output := await hooks.session_start(source)):
            self._opening[session.id] = output

    async def for_turn(self, session: Session) -> SessionHooks | None:
        """The hooks of a session's next turn, the first carrying SessionStart's output."""
        opening = self._opening.pop(session.id, [])
        hooks = await self.for_session(session)
        if hooks is not None:
            hooks.context += opening
        return hooks

    async def for_child(self, child: Session, subagent: Subagent) -> SessionHooks | None:
        """The hooks of a child session's one turn, after its SessionStart, whose output
        that turn carries."""
        hooks = await self.for_session(child, subagent)
        if hooks is not None:
            hooks.context += await hooks.session_start("startup")
        return hooks


class NoHooks(Hooks):
    """A surface whose sessions run no hook (the proxy's: hooks are the inner agent's)."""

    async def for_session(
        self, session: Session, subagent: Subagent | None = None
    ) -> SessionHooks | None:
        return None
