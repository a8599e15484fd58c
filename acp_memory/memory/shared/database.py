"""The team's PostgreSQL server as the shared root sees it: a small pool of connections per DSN,
the schema ensured once, and every way of failing to reach it as one `SharedUnavailable` line
that names the database masked and the real reason.

The pool opens lazily (nothing connects before the first use) and drops broken connections
(checked on the way out of the pool, and whatever a use found broken), so a server restarted
mid-session costs the next use a reconnect, not an error. Where the pool cannot hand out a
connection it hides why; a direct connect, made at the first use and whenever the last use
found the server down, gives the reason and fails fast while the server stays down.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from acp_memory.memory.shared.dsn import mask_dsn, parse_dsn
from acp_memory.memory.shared.errors import SharedUnavailable as SharedUnavailable
from acp_memory.memory.shared.schema import ensure_schema

CONNECT_TIMEOUT = 3  # seconds, libpq's connect_timeout
POOL_SIZE = 4
# How long a use waits for the pool: a connect's timeout and a little more.
POOL_WAIT = CONNECT_TIMEOUT + 2.0
CONNECT_KWARGS: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT,
                                  "application_name": "acp-memory"}

# The pool retries in the background and warns at every attempt; our SharedUnavailable line
# tells the user once instead.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)


class Database:
    """One DSN's pool of connections (see the module's docstring); `database_for` shares it."""

    def __init__(self, dsn: str) -> None:
        self._params = parse_dsn(dsn)  # DsnError: a config error at start, not at first use
        self.dsn = dsn
        self.masked = mask_dsn(dsn)
        # As the last use found it; before any use, not online and no error.
        self.online = False
        self.last_error: str | None = None
        self._schema_ready = False
        self._lock = threading.Lock()
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (autocommit off, the schema ensured once per process), given
        back at exit (rolled back if a transaction is still open). Raises SharedUnavailable
        (with the real reason) or SchemaTooNew."""
        if not self.online or not self._schema_ready:
            self._probe()
        pool = self._opened()
        conn = self._checked(pool)
        try:
            yield conn
        except psycopg.Error as exc:
            if conn.broken or conn.closed:
                raise self._unavailable(_reason(exc, self._params)) from None
            raise
        finally:
            with contextlib.suppress(psycopg.Error):
                if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    conn.rollback()
            pool.putconn(conn)  # the pool discards it when broken

    def _checked(self, pool: ConnectionPool[psycopg.Connection[Any]]
                 ) -> psycopg.Connection[Any]:
        """A pooled connection that answers. One found broken (the server restarted or went
        away since it was pooled) is dropped and the server probed: down, that is the
        reason at once, rather than the pool's silent wait for a connection it cannot make."""
        waited = False
        for _ in range(POOL_SIZE + 1):  # every pooled connection may be broken, once
            try:
                conn = pool.getconn()
            except PoolTimeout:
                self._probe()  # the reason the pool hides; or all are busy: wait once more
                if waited:
                    break
                waited = True
                continue
            try:
                ConnectionPool.check_connection(conn)
            except psycopg.Error:
                pool.putconn(conn)  # broken: the pool discards it
                self._probe()
                continue
            return conn
        raise self._unavailable(f"no connection within {POOL_WAIT:g} s")

    def close(self) -> None:
        """Close the pool (its connections and threads); a later use opens it again."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _opened(self) -> ConnectionPool[psycopg.Connection[Any]]:
        with self._lock:
            if self._pool is None:
                self._pool = ConnectionPool(
                    self.dsn, min_size=0, max_size=POOL_SIZE, open=False, name="acp-memory",
                    kwargs={**CONNECT_KWARGS, "autocommit": False},
                    timeout=POOL_WAIT,
                    reconnect_timeout=30)
                self._pool.open(wait=False)
            return self._pool

    def _probe(self) -> None:
        """Connect directly: the real reason when the server cannot be reached, else the
        schema ensured (once) and the database marked online."""
        try:
            with psycopg.connect(self.dsn, **CONNECT_KWARGS) as conn:
                if not self._schema_ready:
                    ensure_schema(conn)  # SchemaTooNew propagates as it is
                    self._schema_ready = True
        except psycopg.Error as exc:
            raise self._unavailable(_reason(exc, self._params)) from None
        self.online, self.last_error = True, None

    def _unavailable(self, reason: str) -> SharedUnavailable:
        error = SharedUnavailable(f"shared project memory {self.masked}: cannot connect: "
                                  f"{reason}")
        self.online, self.last_error = False, str(error)
        return error


def _reason(exc: BaseException, params: dict[str, str]) -> str:
    """libpq's message on one line, with a password it might echo masked."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = text.removeprefix("connection failed: ")
    if password := params.get("password"):
        text = text.replace(password, "***")
    return text


_databases: dict[str, Database] = {}
_registry_lock = threading.Lock()


def database_for(dsn: str) -> Database:
    """The process's Database for dsn (one per DSN; its pool opens at the first use)."""
    with _registry_lock:
        database = _databases.get(dsn)
        if database is None:
            database = _databases[dsn] = Database(dsn)
        return database


def close_all() -> None:
    """Close every Database of the process (at exit, and between tests)."""
    with _registry_lock:
        databases = list(_databases.values())
        _databases.clear()
    for database in databases:
        database.close()
