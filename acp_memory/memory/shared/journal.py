"""The history of a shared project root, on PostgreSQL: `history/journal.py`'s interface for
one root (the process's local copy of the key's notes), kept in the `acp_memory` schema.

The database is the journal: a change's note rows and its history record commit in one
transaction, so there is no intent to settle after a crash. Every write transaction of a
project holds the project's transaction-scoped advisory lock, which serialises two writers of
one path and makes changes commit in `seq` order (a reader catching up "after seq N" never
misses one). The store holds the copy's folder lock and, inside it, `holding()`: the copy is
caught up under the advisory lock first, so the store's checks run against the server's state;
each `recording()` then checks the path's rows still hold its `before`, writes the rows, the
contents (redacted) and the record, `NOTIFY`s and commits, and only then lets the store write
the local file. The local copy only ever lags the server, never leads it: a writer killed
between the commit and its local write leaves its copy behind the marker's `seq`, which the
next catch-up brings.

The parts: `tables.py` (connections, contents, the record, pruning), `history.py` (reading
the history), `held.py` (held changes), `purge.py` (a path's history dropped), this module
(holding and recording). Every Change and Held returned names the local copy as its root and
`project` as its scope; the tables key them by the project, whose root differs on every
machine.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg

from acp_memory.memory.history.journal import JournalError, ancestors_of, like_prefix
from acp_memory.memory.history.journals import HistoryConflict
from acp_memory.memory.history.records import ChangeSource, new_id
from acp_memory.memory.history.states import DIR, NOTE, Captured, digest, folder
from acp_memory.memory.redact import redact_bytes
from acp_memory.memory.shared.held import HeldChanges
from acp_memory.memory.shared.history import HistoryReads
from acp_memory.memory.shared.purge import Purging
from acp_memory.memory.shared.schema import SCHEMA
from acp_memory.memory.shared.tables import (
    OPEN,
    SCOPE,
    Holding,
    lock_project,
    signed,
)
from acp_memory.oserror import os_error_text

log = logging.getLogger(__name__)


class SharedConflict(HistoryConflict):
    """The path's rows are not what the caller found in its copy: someone on the team changed
    it just now. Nothing was written; the message is the whole line."""


class SharedJournal(HistoryReads, HeldChanges, Purging):
    """The history of one project key on the team's server, for the local copy's root."""

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """What the store's root lock adds for this root (the caller holds the copy's
        folder lock): a transaction holding the project's advisory lock with the copy caught
        up to the server; what is still open at the end commits (rolled back on an error).
        Re-entered in the same thread, it is the one already open."""
        if self._holding() is not None:
            yield
            return
        with self.database.connection() as conn:
            held = self._local.held = Holding(conn)
            try:
                self._lock(held)
                yield
                if conn.info.transaction_status in OPEN:
                    conn.commit()
            except BaseException:
                with contextlib.suppress(psycopg.Error):
                    conn.rollback()
                raise
            finally:
                self._local.held = None

    # -- the notes as the server holds them ------------------------------------------------

    def _state(self, conn: psycopg.Connection[Any], path: str) -> str | None:
        """What path holds in the notes table, as `states.capture` reads the same files from
        disk: a note's hash, or a folder's manifest (every folder and note under it: the
        folders holding a note are folders on disk whether or not they have a row)."""
        row = None
        if path:
            row = conn.execute(f"SELECT sha256 FROM {SCHEMA}.notes WHERE project = %s AND "
                               "path = %s", (self.key, path)).fetchone()
            if row is not None and row[0] is not None:
                return NOTE + str(row[0])
        under = self._under(conn, path)
        if path and row is None and not under:
            return None
        dirs: set[str] = set()
        files: dict[str, str] = {}
        for rel, sha in under:
            parts = rel.split("/")
            dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
            if sha is None:
                dirs.add(rel)
            else:
                files[rel] = sha
        return folder(sorted(dirs - set(files)), files, {}, {}).state

    def _under(self, conn: psycopg.Connection[Any], path: str) -> list[tuple[str, str | None]]:
        """The rows under path (the root's: all), as (path relative to it, sha256 or None
        for a folder)."""
        if not path:
            rows = conn.execute(f"SELECT path, sha256 FROM {SCHEMA}.notes WHERE project = %s",
                                (self.key,)).fetchall()
            return [(str(p), s) for p, s in rows]
        rows = conn.execute(f"SELECT path, sha256 FROM {SCHEMA}.notes WHERE project = %s AND "
                            "path LIKE %s", (self.key, like_prefix(path))).fetchall()
        return [(str(p)[len(path) + 1:], s) for p, s in rows]

    def _make(self, conn: psycopg.Connection[Any], path: str, after: Captured,
              by: str) -> None:
        """Make the notes rows at path what `after` says: a note (the folders holding it made
        too), a folder with exactly its manifest's folders and notes, or nothing."""
        state = after.state
        doomed = {rel for rel, _ in self._under(conn, path)}
        rows: dict[str, bytes | None] = {}  # rel to path: a note's bytes, or None for a folder
        if state is not None and state.startswith(NOTE):
            rows[""] = self._data(conn, after, state[len(NOTE):], path)
        elif state is not None:
            folder_ = json.loads(self._data(conn, after, state[len(DIR):], path))
            rows.update({str(d): None for d in folder_["dirs"]})
            rows.update({str(rel): self._data(conn, after, str(h), f"{path}/{rel}")
                         for rel, h in folder_["files"].items()})
            if path:
                rows[""] = None
        doomed -= set(rows)
        full = {rel: f"{path}/{rel}".strip("/") if rel else path for rel in rows}
        if state is None and path:
            doomed.add("")
        if doomed:
            conn.execute(f"DELETE FROM {SCHEMA}.notes WHERE project = %s AND path = ANY(%s)",
                         (self.key, [f"{path}/{rel}".strip("/") if rel else path
                                     for rel in doomed]))
        if state is None:
            return
        holders = {a for p in full.values() for a in ancestors_of(p) if a}
        now = self.now()
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {SCHEMA}.notes(project, path, body, sha256, updated_at, "
                "updated_by) VALUES (%s, %s, NULL, NULL, %s, %s) ON CONFLICT DO NOTHING",
                [(self.key, a, now, by) for a in sorted(holders - set(full.values()))])
            cur.executemany(
                f"INSERT INTO {SCHEMA}.notes(project, path, body, sha256, updated_at, "
                "updated_by) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (project, path) DO "
                "UPDATE SET body = excluded.body, sha256 = excluded.sha256, updated_at = "
                "excluded.updated_at, updated_by = excluded.updated_by WHERE "
                "notes.sha256 IS DISTINCT FROM excluded.sha256",
                [(self.key, full[rel], None if data is None else self._text(data, full[rel]),
                  None if data is None else digest(data), now, by)
                 for rel, data in sorted(rows.items())])

    def _data(self, conn: psycopg.Connection[Any], captured: Captured, h: str,
              path: str) -> bytes:
        """The bytes under h that a state the caller writes names: its own, else the stored
        ones; a note the store did not redact that holds a secret is refused, never sent."""
        data = captured.blobs.get(h)
        if data is None:
            return self.blob(h, conn, f"{SCOPE}:{path}")
        if not captured.redacted and captured.state != DIR + h and redact_bytes(data)[1]:
            raise JournalError(f"{SCOPE}:{path} holds a secret the store did not redact; "
                               "it was not sent to the team's server")
        return data

    def _text(self, data: bytes, path: str) -> str:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = "\0"
        if "\0" in text:
            raise JournalError(f"{SCOPE}:{path} is not UTF-8 text; the team's server keeps "
                               "text notes only")
        return text

    # -- recording a change ----------------------------------------------------------------

    @contextlib.contextmanager
    def recording(
        self,
        where: tuple[str, Path, str],
        action: str,
        before: Captured,
        after: Captured,
        source: ChangeSource,
        *,
        current: Callable[[], Captured],
        undoes: str | None = None,
        releases: str | None = None,
    ) -> Iterator[str]:
        """Record the change of (scope, root, path) from before to after in one transaction
        with the notes rows it makes, commit it, then yield its id for the caller to write
        the local file (the copy never leads the server). A path whose rows are not `before`
        any more is a SharedConflict; a commit that fails is a JournalError, the body never
        run. A body that raises OSError (the copy cannot be written) is a warning, not a
        failure: the change is made for the team and the next catch-up brings it; any other
        exception goes up. `releases` names the held change this one makes, dropped in the
        same transaction. `current` is the disk journal's: the server is the truth here."""
        _, _, path = where
        held = self._holding()
        if held is None:  # a caller that did not lock: a transaction of its own
            with self.database.connection() as conn:
                own = Holding(conn)
                lock_project(conn, self.key)  # no catch-up: it would take the folder lock
                self._local.held = own
                try:
                    with self._recorded(own, path, action, before, after, source, undoes,
                                        releases, caught_up=False) as cid:
                        yield cid
                finally:
                    self._local.held = None
            return
        if not held.locked:  # an earlier recording of this holding committed
            self._lock(held)
        with self._recorded(held, path, action, before, after, source, undoes, releases,
                            caught_up=True) as change_id:
            yield change_id

    @contextlib.contextmanager
    def _recorded(self, held: Holding, path: str, action: str, before: Captured,
                  after: Captured, source: ChangeSource, undoes: str | None,
                  releases: str | None, *, caught_up: bool) -> Iterator[str]:
        conn = held.conn
        change_id = new_id("chg")
        source = signed(source)
        held.locked = False  # the commit (or the rollback) below ends the locked transaction
        try:
            if self._state(conn, path) != before.state:
                raise SharedConflict(f"{SCOPE}:{path} changed on the team's server just now; "
                                     "nothing was written, try again")
            self._store_blobs(conn, before, after)
            self._make(conn, path, after, f"{source.user}@{source.host}")
            seq = self._record(conn, change_id, path, action, before.state, after.state,
                               source, undoes=undoes, releases=releases)
            if releases is not None:
                conn.execute(f"DELETE FROM {SCHEMA}.held WHERE project = %s AND id = %s",
                             (self.key, releases))
        except BaseException as exc:
            # Nothing of it may commit with whatever the holding does next.
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
            if not isinstance(exc, psycopg.Error) or conn.broken or conn.closed:
                raise
            raise self._error(exc) from None
        try:
            conn.commit()
        except psycopg.Error as exc:  # the body never ran: nothing local to put back
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
            raise self._error(exc, "cannot commit: ") from None
        try:
            yield change_id
        except OSError as exc:
            # The team has the change; the marker stays before it, so a catch-up brings it.
            log.warning("the local copy of %s:%s was not written: %s; the next catch-up "
                        "brings it", SCOPE, path, os_error_text(exc))
            return
        if caught_up:
            self.copy.applied(seq)

    def recover(self, root: Path, current: Callable[[str], Captured]) -> int:
        """Nothing to settle: a change and its record commit together."""
        return 0

    def has_intents(self, root: Path) -> bool:
        """Never: the database is the journal, with no intent to settle."""
        return False
