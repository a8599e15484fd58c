"""A shared project's tables on the team's server as its journal (`journal.py`) reaches them:
the connection a call uses (the thread's holding's, else a pooled one), the project's advisory
lock, who a change's source names, the stored contents, the record of a change, and pruning.

The parts of the journal (`history.py` reading the history, `held.py` the held changes,
`purge.py` a path's whole history dropped, `journal.py` recording) are built on this one.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from acp_memory.memory.history.journal import JournalError
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.history.states import DIR, NOTE, Captured, manifest
from acp_memory.memory.redact import redact_bytes
from acp_memory.memory.shared.copy import LocalCopy
from acp_memory.memory.shared.database import Database
from acp_memory.memory.shared.schema import CHANNEL, SCHEMA
from acp_memory.timestamps import Now, utc_now

SCOPE = "project"
PRUNE_EVERY = timedelta(hours=1)  # the tables are the team's: one process prunes rarely
# A transaction still open (a broken connection has none to commit)
OPEN = (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR)


def lock_project(conn: psycopg.Connection[Any], key: str) -> None:
    """Take the project's advisory lock for the rest of conn's transaction: every write of
    the project's tables holds it, so changes commit in seq order."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                 (f"acp_memory project {key}",))


@cache
def _who() -> tuple[str, str]:
    """This process's OS user and host, as a change's source names them."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for the uid (a container): the number says enough
        user = str(os.getuid())
    return user, socket.gethostname()


def signed(source: ChangeSource) -> ChangeSource:
    """source with this process's OS user and host where it names none (who on the team)."""
    user, host = _who()
    return replace(source, user=source.user or user, host=source.host or host)


@dataclass
class Holding:
    """The thread's open holding: its connection, and whether the transaction open on it
    holds the advisory lock with the copy caught up (a recording's commit ends both)."""

    conn: psycopg.Connection[Any]
    locked: bool = False


class ProjectTables:
    """One project key's tables, for the local copy's root (see the module's docstring)."""

    def __init__(self, database: Database, key: str, copy: LocalCopy, keep_days: int = 90,
                 pending_days: int = 7, now: Now = utc_now) -> None:
        self.database = database
        self.key = key
        self.copy = copy
        self.keep_days = keep_days  # 0 keeps every record
        self.pending_days = pending_days
        self.now = now
        self._local = threading.local()
        self._pruned: datetime | None = None
        self._prune_lock = threading.Lock()

    @property
    def root(self) -> Path:
        """The local copy's root: the root every returned record names."""
        return self.copy.root

    def close(self) -> None:
        """Nothing of its own to close: the connections are the Database's."""

    # -- connections -----------------------------------------------------------------------

    def _holding(self) -> Holding | None:
        held: Holding | None = getattr(self._local, "held", None)
        return held

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        """The thread's holding connection (its transaction is the holding's to end), else a
        pooled one whose transaction commits when the body ends. A broken connection goes
        up as it is (the Database turns it into SharedUnavailable); any other database
        error is a JournalError naming the server."""
        held = self._holding()
        if held is not None:
            try:
                yield held.conn
            except psycopg.Error as exc:
                if held.conn.broken or held.conn.closed:
                    raise
                raise self._error(exc) from None
            return
        with self.database.connection() as conn:
            try:
                yield conn
                if conn.info.transaction_status in OPEN:
                    conn.commit()
            except psycopg.Error as exc:
                if conn.broken or conn.closed:
                    raise
                raise self._error(exc) from None

    def _error(self, exc: BaseException, doing: str = "") -> JournalError:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return JournalError(f"the shared memory history {self.database.masked}: {doing}{reason}")

    def _lock(self, held: Holding) -> None:
        """The advisory lock in held's transaction, and the copy caught up under it."""
        lock_project(held.conn, self.key)
        self.copy.catch_up(held.conn, locked=True)
        held.locked = True

    def _record(self, conn: psycopg.Connection[Any], change_id: str, path: str, action: str,
                before: str | None, after: str | None, source: ChangeSource, *,
                undoes: str | None = None, releases: str | None = None) -> int:
        """Insert a change's history record (the caller holds the advisory lock) and tell
        every listener of it (the NOTIFY goes out when the transaction commits); its seq."""
        (seq,) = conn.execute(
            f"INSERT INTO {SCHEMA}.history(id, project, path, action, before, after, "
            "source, time, undoes, releases) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, "
            "%s) RETURNING seq",
            (change_id, self.key, path, action, before, after, Jsonb(source.as_json()),
             self.now(), undoes, releases)).fetchone() or (0,)
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{self.key} {seq}"))
        return int(seq)

    # -- contents --------------------------------------------------------------------------

    def blob(self, h: str, conn: psycopg.Connection[Any] | None = None, of: str = "") -> bytes:
        """The bytes stored under a hash (through conn when given; `of` names the path they
        are wanted for in the error)."""
        if conn is None:
            with self._conn() as own:
                return self.blob(h, own, of)
        row = conn.execute(f"SELECT data FROM {SCHEMA}.blobs WHERE project = %s AND "
                           "hash = %s", (self.key, h)).fetchone()
        if row is None:
            raise JournalError(f"the shared memory history {self.database.masked} lacks "
                               f"content {h[:12]}" + (f" for {of}" if of else ""))
        return bytes(row[0])

    def manifest_of(self, state: str) -> dict[str, Any]:
        return manifest(state, self.blob)

    def redacted(self, state: str | None) -> int:
        """How many secrets the contents a state names lost when they were stored."""
        if state is None:
            return 0
        hashes = [state[len(NOTE):]] if state.startswith(NOTE) else list(
            self.manifest_of(state)["files"].values())
        with self._conn() as conn:
            counts = dict(conn.execute(
                f"SELECT hash, redacted FROM {SCHEMA}.blobs WHERE project = %s AND "
                "hash = ANY(%s)", (self.key, list(set(hashes)))).fetchall())
        return sum(counts.get(h, 0) for h in hashes)

    def _store_blobs(self, conn: psycopg.Connection[Any], *captured: Captured) -> None:
        """The blobs the states name that are not stored yet: a note's contents redacted, a
        manifest or text redacted already as it is (as the disk journal stores them)."""
        wanted = {h: (data, c.redacted or c.state == DIR + h)
                  for c in captured for h, data in c.blobs.items()}
        if not wanted:
            return
        known = {h for (h,) in conn.execute(
            f"SELECT hash FROM {SCHEMA}.blobs WHERE project = %s AND hash = ANY(%s)",
            (self.key, list(wanted)))}
        rows = [(self.key, h, data, 0) if as_is else (self.key, h, *redact_bytes(data))
                for h, (data, as_is) in wanted.items() if h not in known]
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {SCHEMA}.blobs(project, hash, data, redacted) "
                            "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING", rows)

    # -- pruning ---------------------------------------------------------------------------

    def prune(self) -> None:
        """Drop the project's records past keep_days and held changes past pending_days,
        then the contents no record uses; at most once an hour per process (the tables are
        the whole team's)."""
        now = self.now()
        with self._prune_lock:
            if self._pruned is not None and now - self._pruned < PRUNE_EVERY:
                return
            self._pruned = now
        with self._conn() as conn:
            lock_project(conn, self.key)
            gone = 0
            if self.keep_days:
                gone += conn.execute(f"DELETE FROM {SCHEMA}.history WHERE project = %s AND "
                                     "time < %s", (self.key, now - timedelta(
                                         days=self.keep_days))).rowcount
            if self.pending_days:
                gone += conn.execute(f"DELETE FROM {SCHEMA}.held WHERE project = %s AND "
                                     "time < %s", (self.key, now - timedelta(
                                         days=self.pending_days))).rowcount
            if gone:
                self._sweep(conn)

    def _sweep(self, conn: psycopg.Connection[Any]) -> None:
        """Drop the project's blobs no record or held change uses any more (the caller holds
        the advisory lock, which every writer of blobs takes)."""
        states = {s for (s,) in conn.execute(
            f"SELECT before FROM {SCHEMA}.history WHERE project = %(p)s UNION "
            f"SELECT after FROM {SCHEMA}.history WHERE project = %(p)s UNION "
            f"SELECT before FROM {SCHEMA}.held WHERE project = %(p)s UNION "
            f"SELECT after FROM {SCHEMA}.held WHERE project = %(p)s UNION "
            # A merge's other paths (held.parts) name states too.
            f"SELECT part->>'before' FROM {SCHEMA}.held, jsonb_array_elements(held.parts) "
            "AS part WHERE project = %(p)s AND parts IS NOT NULL UNION "
            f"SELECT part->>'after' FROM {SCHEMA}.held, jsonb_array_elements(held.parts) "
            "AS part WHERE project = %(p)s AND parts IS NOT NULL", {"p": self.key})
            if s}
        used = {s.partition(":")[2] for s in states}
        dirs = [s[len(DIR):] for s in states if s.startswith(DIR)]
        for (data,) in conn.execute(f"SELECT data FROM {SCHEMA}.blobs WHERE project = %s AND "
                                    "hash = ANY(%s)", (self.key, dirs)):
            used.update(json.loads(bytes(data))["files"].values())
        conn.execute(f"DELETE FROM {SCHEMA}.blobs WHERE project = %s AND hash <> ALL(%s)",
                     (self.key, sorted(used)))
