"""The MCP servers of each session in one surface: opened in the background when the editor
names them (session/new, load, resume), the config's `mcp.servers` (and with
`mcp.project_file: allow` the session's `<cwd>/.mcp.json`) joined to them, waited for
by a turn, stopped with their session or when the surface stops.

The runner owns the service, and the service's connections are tasks of the runner's group,
so none outlives the surface (a stdio server's process group, and whatever else it started,
is ended on the way out).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from anyio.abc import TaskGroup

from acp_memory.clock import Clock
from acp_memory.config import Config
from acp_memory.engine.events import Emit, ServerNotice
from acp_memory.mcpclient.configured import configured_specs
from acp_memory.mcpclient.specs import ServerSpec, merged
from acp_memory.sessions.store import Session
from acp_memory.tools.base import Tool

if TYPE_CHECKING:  # the SDK costs half a second to import: loaded once a session has servers
    from acp_memory.mcpclient.group import ServerGroup

log = logging.getLogger(__name__)


class McpService:
    """The servers of each session, by session id."""

    def __init__(
        self, cfg: Config, owner: Callable[[], TaskGroup], clock: Callable[[], Clock] = Clock
    ) -> None:
        self.cfg = cfg
        self.owner = owner
        self.clock = clock  # the runner's: bounds each tool call (mcp.call_timeout_seconds)
        # What each session was opened with, kept after its servers stop (an idle session
        # let go), so that its next turn starts them again.
        self._specs: dict[str, list[ServerSpec]] = {}
        self._groups: dict[str, ServerGroup] = {}

    def open(self, session: Session, editor_specs: Sequence[ServerSpec]) -> None:
        """Start the session's servers in the background (the editor's, then those of the
        project file and the config of other names), stopping those it had; returns at once.
        A child session has none."""
        if session.record.subagent_run:
            return
        self.release(session.id)
        if specs := merged(editor_specs, self._configured(session)):
            self._specs[session.id] = specs
            self._start(session)
        else:
            self._specs.pop(session.id, None)

    def _start(self, session: Session) -> ServerGroup | None:
        specs = self._specs.get(session.id)
        if not specs:
            return None
        from acp_memory.mcpclient.group import ServerGroup

        timeout = self.cfg.mcp.startup_timeout_seconds
        group = self._groups[session.id] = ServerGroup(
            specs, Path(session.record.cwd), timeout, self.owner,
            call_timeout=self.cfg.mcp.call_timeout_seconds, clock=self.clock,
        )
        group.start()
        return group

    async def turn_tools(self, session: Session, emit: Emit) -> list[Tool]:
        """The MCP tools a turn of `session` is offered in its mode: its servers started when
        they are not (a surface that never opened them gets the configured ones), a dead one
        started again, all waited for within the start timeout; each failure is one line on the
        turn's stream (`MCP server <name>: <reason>`), and the turn goes on without that server."""
        if session.record.subagent_run:
            return []  # children never get MCP tools
        if session.id not in self._specs and (configured := self._configured(session)):
            self._specs[session.id] = configured
        group = self._groups.get(session.id) or self._start(session)
        if group is None:
            return []
        group.restart_dead()
        await group.ready()
        for name, reason in group.take_failures():
            await emit(ServerNotice(f"MCP server {name}: {reason}\n"))
        from acp_memory.tools.mcp import mcp_tools

        return list(mcp_tools(group.alive(), session.record.mode))

    def _configured(self, session: Session) -> list[ServerSpec]:
        return configured_specs(self.cfg, Path(session.record.cwd))

    def release(self, session_id: str) -> None:
        """Stop the session's servers (it was let go, or opened again); its next turn starts
        them again."""
        group = self._groups.pop(session_id, None)
        if group is not None:
            group.close()

    async def forget(self, session_id: str) -> None:
        """Stop the session's servers for good (it was closed or deleted), returning once
        their processes are gone."""
        self._specs.pop(session_id, None)
        group = self._groups.pop(session_id, None)
        if group is not None:
            await group.aclose()

    def close(self) -> None:
        """Stop every session's servers (the surface stops)."""
        for session_id in list(self._groups):
            self.release(session_id)
