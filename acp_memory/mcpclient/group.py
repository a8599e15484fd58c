"""The MCP servers of one session: started together in the background, waited for by the first
turn within the start timeout, each failure told once, a dead server started again."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from acp_memory.clock import Clock
from acp_memory.mcpclient.connection import CALL_TIMEOUT_SECONDS, ServerConnection, timed_out
from acp_memory.mcpclient.specs import ServerSpec

# How long a close waits for the servers' processes to end (the SDK's own bound is ~6 s,
# and ending what a server left behind up to 4 s more).
STOP_BOUND_SECONDS = 12.0


class ServerGroup:
    """The connections of one session, in the order of their specs."""

    def __init__(
        self,
        specs: Sequence[ServerSpec],
        cwd: Path,
        startup_timeout: float,
        owner: Callable[[], TaskGroup],
        call_timeout: float = CALL_TIMEOUT_SECONDS,
        clock: Callable[[], Clock] = Clock,
    ) -> None:
        self.cwd = cwd
        self.startup_timeout = startup_timeout
        self.call_timeout = call_timeout
        self.clock = clock
        self.owner = owner  # the group the connections' tasks belong to (the runner's)
        self.connections = [self._connection(s) for s in specs]
        self.closed = False
        self._deaths: list[tuple[str, str]] = []  # servers that died, until told

    def start(self) -> None:
        """Connect every server in the background; returns at once."""
        for connection in self.connections:
            connection.start(self.owner())

    def restart_dead(self) -> None:
        """Start again each server that was running and has since died (a crash, an exit);
        one that never started stays failed, and is not retried at every turn."""
        for index, old in enumerate(self.connections):
            if old.started and not old.alive and not self.closed:
                if not old.reported:
                    self._deaths.append((old.name, f"{old.failure or 'stopped'}; started again"))
                fresh = self._connection(old.spec)
                self.connections[index] = fresh
                fresh.start(self.owner())

    def _connection(self, spec: ServerSpec) -> ServerConnection:
        return ServerConnection(
            spec, self.cwd, self.startup_timeout, self.call_timeout, self.clock
        )

    async def ready(self) -> None:
        """Wait until every server started or failed, at most the start timeout."""
        with anyio.move_on_after(self.startup_timeout):
            for connection in self.connections:
                await connection.settled.wait()

    def take_failures(self) -> list[tuple[str, str]]:
        """(name, reason) of each server that failed since the last call, once each; one
        still starting after the wait has timed out: it is stopped, and its warning logged
        now (print mode's stderr says the line only there)."""
        told, self._deaths = self._deaths, []
        for connection in self.connections:
            if connection.reported or connection.alive:
                continue
            if not connection.settled.is_set():
                connection.give_up(timed_out(self.startup_timeout))
            connection.reported = True
            told.append((connection.name, connection.failure or "stopped"))
        return told

    def alive(self) -> list[ServerConnection]:
        return [c for c in self.connections if c.alive]

    def close(self) -> None:
        """Stop every server; their processes end in the owner group (shielded, bounded)."""
        self.closed = True
        for connection in self.connections:
            connection.stop()

    async def aclose(self) -> None:
        """Stop every server and return once each one's process is gone."""
        self.close()
        # The SDK bounds each shutdown (stdin closed, then the group killed); so does this.
        with anyio.move_on_after(STOP_BOUND_SECONDS):
            for connection in self.connections:
                await connection.ended.wait()
