"""Running user turns of sessions, for every surface: the ACP agent and print mode alike.

The runner owns what outlives a single prompt: the task group that background work of every
session belongs to (closed when the surface stops), and the services each session's tools get.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from acp_memory.config import Config, Paths
from acp_memory.engine.events import Emit
from acp_memory.engine.turn import (
    PlainContext,
    StopReason,
    TurnContextSource,
    TurnEngine,
    TurnSetup,
)
from acp_memory.llm.registry import ModelHandle
from acp_memory.sessions.store import Session
from acp_memory.tools.base import Editor, ToolContext

log = logging.getLogger(__name__)


class SessionRunner:
    """Turns for the sessions of one surface, and the owner of their background work."""

    def __init__(
        self,
        cfg: Config,
        paths: Paths,
        engine: TurnEngine,
        model_for: Callable[[str], ModelHandle],
    ) -> None:
        self.cfg = cfg
        self.paths = paths
        self.engine = engine
        self.model_for = model_for
        self._owner: TaskGroup | None = None

    @property
    def owner(self) -> TaskGroup:
        """The task group background work belongs to; only inside `running()`."""
        if self._owner is None:
            raise RuntimeError("the session runner is not running")
        return self._owner

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[SessionRunner]:
        """Own the background work of every session until the block ends, then stop it."""
        try:
            async with anyio.create_task_group() as tg:
                self._owner = tg
                try:
                    yield self
                finally:
                    self._owner = None
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # Background tasks keep their failures to themselves, so a group holds the one
            # error of the block: the caller handles it as it would without the group.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

    def tool_context(self, session: Session, editor: Editor | None = None) -> ToolContext:
        """What the tools of `session` may reach in this surface."""
        record = session.record
        return ToolContext(
            session.id,
            Path(record.cwd),
            record.mode,
            bundle=session.dir,
            editor=editor,
        )

    def turn_context(self, session: Session) -> TurnContextSource:
        """Where the runtime state of the session's next turn comes from."""
        return PlainContext()

    async def run_turn(
        self, session: Session, text: str, emit: Emit, *, editor: Editor | None = None
    ) -> StopReason:
        """One user turn of an ordinary session on its selected model.

        Raises UnknownModelError for a model id no provider serves, LLMError when the model
        call fails, BundleBusy or OSError when the bundle cannot be written.
        """
        model = self.model_for(session.record.selected_model_id)
        setup = TurnSetup(
            tool_context=self.tool_context(session, editor),
            context=self.turn_context(session),
        )
        return await self.engine.run(session, text, model, emit, setup)
