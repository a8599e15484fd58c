"""Each change a team mate commits, brought into this process's local copies at once.

One `Listener` per database, run as a task of the runner's group: its own connection
(autocommit) `LISTEN`s on the changes channel, and each `NOTIFY` (payload `"<project> <seq>"`)
of a key this process holds pokes and refreshes that root (its local copy caught up by `seq`,
off the event loop). A connection that fails or closes is opened again after a backoff (1 s,
doubling to 10 s), and every root is refreshed then, so what was committed meanwhile is caught
up. Where LISTEN is refused (a transaction-pooling proxy) it polls every second instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import anyio
import anyio.to_thread
import psycopg

from acp_memory.memory.shared.database import CONNECT_KWARGS
from acp_memory.memory.shared.dsn import parse_dsn
from acp_memory.memory.shared.schema import CHANNEL

log = logging.getLogger(__name__)

RETRY_FIRST_S = 1.0
RETRY_MAX_S = 10.0
POLL_S = 1.0
# How long a quiet connection waits before it is checked (and every root refreshed, in case a
# notification was lost on the way).
QUIET_S = 15.0


class Watched(Protocol):
    """What the listener needs of a shared root (`root.SharedRoot`)."""

    key: str

    def poke(self) -> None: ...

    def refresh(self) -> str | None: ...


# Told after each refresh: the root, and its offline marker (None: caught up).
Refreshed = Callable[[Watched, str | None], None]


class Listener:
    """Keeps the watched roots of one database caught up with the server (see the module)."""

    statement = f"LISTEN {CHANNEL}"

    def __init__(self, dsn: str, masked: str, on_refreshed: Refreshed | None = None) -> None:
        self.dsn = dsn
        self.masked = masked
        self.on_refreshed = on_refreshed
        self.roots: dict[str, Watched] = {}
        self.polling = False  # LISTEN was refused: the roots are polled every second
        self.listening = False  # a connection is listening now
        self.quiet_s = QUIET_S
        self._password = parse_dsn(dsn).get("password", "")
        self._due: set[str] = set()  # keys to refresh
        self._wake: anyio.Event | None = None

    def watch(self, root: Watched) -> None:
        """Keep root caught up from now on; its first refresh is due at once."""
        self.roots[root.key] = root
        self._mark([root.key])

    def unwatch(self, key: str) -> None:
        """Stop keeping key's root caught up."""
        self.roots.pop(key, None)

    async def run(self) -> None:
        """Listen (or poll) until cancelled, reconnecting after any failure."""
        self._wake = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._refresher)
            delay = RETRY_FIRST_S
            while not self.polling:
                if await self._connected():
                    delay = RETRY_FIRST_S
                if self.polling:
                    break
                # Down: the roots find out (their refresh says offline), and are caught up
                # once the connection is back.
                self._mark(self.roots)
                await anyio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
            while True:
                self._mark(self.roots)
                await anyio.sleep(POLL_S)

    async def _connected(self) -> bool:
        """One connection's life: False when it could not be made, True when it listened
        until it failed, or LISTEN was refused (`polling`)."""
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.dsn, **{**CONNECT_KWARGS, "autocommit": True})
        except psycopg.Error as exc:
            log.debug("listener for %s: cannot connect: %s", self.masked, self._line(exc))
            return False
        try:
            async with conn:
                if await self._listen(conn):
                    await self._follow(conn)
        except psycopg.Error as exc:
            log.debug("listener for %s: connection lost: %s", self.masked, self._line(exc))
        finally:
            self.listening = False
        return True

    async def _listen(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        try:
            await conn.execute(self.statement)
        except psycopg.Error as exc:
            if conn.broken or conn.closed:
                raise
            log.info("shared project memory %s: LISTEN refused (%s); polling for changes "
                     "every %g s", self.masked, self._line(exc), POLL_S)
            self.polling = True
            return False
        return True

    async def _follow(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Mark what the notifications name until the connection fails (raises)."""
        self.listening = True
        self._mark(self.roots)  # connected again: catch up what came meanwhile
        while True:
            async for note in conn.notifies(timeout=self.quiet_s):
                key, _, _ = note.payload.rpartition(" ")
                if key in self.roots:
                    self._mark([key])
            await conn.execute("SELECT 1")  # quiet: is the connection still there?
            self._mark(self.roots)

    async def _refresher(self) -> None:
        while True:
            assert self._wake is not None
            await self._wake.wait()
            self._wake = anyio.Event()
            await self._refresh_due()

    def _line(self, exc: BaseException) -> str:
        """An error on one line, with a password it might echo masked."""
        text = " ".join(str(exc).split()) or type(exc).__name__
        return text.replace(self._password, "***") if self._password else text

    def _mark(self, keys: Iterable[str]) -> None:
        self._due.update(keys)
        if self._wake is not None:
            self._wake.set()

    async def _refresh_due(self) -> None:
        due, self._due = self._due, set()
        for key in due:
            root = self.roots.get(key)
            if root is None:
                continue
            root.poke()
            try:
                marker = await anyio.to_thread.run_sync(root.refresh)
            except Exception as exc:  # never the runner's failure: the next change tries again
                log.warning("shared project memory %s: cannot catch up %s: %s", self.masked,
                            key, self._line(exc))
                log.debug("the failure in full", exc_info=True)
                continue
            if self.on_refreshed is not None:
                self.on_refreshed(root, marker)
