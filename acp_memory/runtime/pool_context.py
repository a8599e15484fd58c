"""The turn context's background section: a session's background tasks as the model reads them
at each step of a turn."""

from __future__ import annotations

from acp_memory.engine.prompt import TurnContext
from acp_memory.tasks.pool import TaskPool


class PoolContext:
    """The turn context's background section: tasks that ended since the last step (each
    announced once), then those still running; one line each, never their output."""

    def __init__(self, pool: TaskPool) -> None:
        self.pool = pool

    async def begin(self) -> None:
        return None

    def step(self) -> TurnContext:
        return TurnContext(
            background_tasks=[*self.pool.announcements.take(), *self.pool.running_lines()]
        )
