"""The journal: one record per change of a note or a folder in any root, under the home.

A change is journaled as an intent (committed, so fsynced) before the note's rename and marked
done after it, without a sync of its own (the next synced commit or checkpoint takes it to
disk); a process that died between the two, or a power cut that lost the done mark, leaves an
intent that the next writer of that root settles under the root's lock: the path holding the
intent's "before" drops it, anything else completes it (and an approved change's hold goes
with its completion). A journal that cannot be written refuses the change. Contents are stored
once by hash, redacted (a journal of an earlier version is redacted once when this one opens
it: `upgrade.py`); records older than `memory.history_days` go, with the blobs only they held.
A purge (`purge.py`) drops every record of a path.

The same database keeps the changes held for approval (`held.py`; `pending.py` applies them),
and the recall read stamps and each memory run's cost (`runs.py`).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from acp_memory.memory.history.held import HeldChanges
from acp_memory.memory.history.held import Part as Part  # where the journal's users find it
from acp_memory.memory.history.held import held_parts as held_parts
from acp_memory.memory.history.records import CHANGE_COLUMNS, Change, ChangeSource, new_id
from acp_memory.memory.history.runs import RunRecords
from acp_memory.memory.history.states import (
    DIR,
    NOTE,
    Captured,
    crash_point,
    manifest,
)
from acp_memory.memory.history.upgrade import VERSION, recorded_states, upgrade
from acp_memory.memory.redact import redact_bytes
from acp_memory.timestamps import Now, iso, utc_now

ACTIONS = ("create", "update", "delete", "mkdir", "rmdir", "undo", "purge")
SURFACES = ("memory_run", "reflect", "tidy", "memory_tool", "cli", "http", "command")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs(hash TEXT PRIMARY KEY, data BLOB NOT NULL,
                                 redacted INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS changes(
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, time TEXT NOT NULL,
    scope TEXT NOT NULL, root TEXT NOT NULL, path TEXT NOT NULL, action TEXT NOT NULL,
    before TEXT, after TEXT, surface TEXT NOT NULL, session_id TEXT, task_id TEXT,
    message TEXT, undoes TEXT, done INTEGER NOT NULL DEFAULT 0, releases TEXT);
CREATE INDEX IF NOT EXISTS changes_at ON changes(root, path, seq);
CREATE INDEX IF NOT EXISTS changes_of_task ON changes(task_id);
CREATE INDEX IF NOT EXISTS intents ON changes(root) WHERE done = 0;
CREATE TABLE IF NOT EXISTS pending(
    id TEXT PRIMARY KEY, time TEXT NOT NULL, scope TEXT NOT NULL, root TEXT NOT NULL,
    path TEXT NOT NULL, action TEXT NOT NULL, before TEXT, after TEXT, surface TEXT NOT NULL,
    session_id TEXT, task_id TEXT, message TEXT, reason TEXT, parts TEXT);
CREATE TABLE IF NOT EXISTS reads(root TEXT NOT NULL, path TEXT NOT NULL, time TEXT NOT NULL,
                                 PRIMARY KEY (root, path));
CREATE TABLE IF NOT EXISTS runs(
    task_id TEXT NOT NULL, session_id TEXT NOT NULL, time TEXT NOT NULL,
    model_calls INTEGER NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    cached_read_tokens INTEGER NOT NULL, cached_write_tokens INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL, PRIMARY KEY (session_id, task_id));
"""
class JournalError(Exception):
    """The journal cannot be read or written; the message names its file and why."""


class Journal(HeldChanges, RunRecords):
    """The database under the home; opened on first use, shared by threads (one lock)."""

    def __init__(
        self, db_path: Path, keep_days: int = 90, pending_days: int = 7, now: Now = utc_now
    ) -> None:
        self.db_path = db_path
        self.keep_days = keep_days  # 0 keeps every record
        self.pending_days = pending_days
        self.now = now
        self._db: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._pruned: datetime | None = None

    def close(self) -> None:
        """Close the connection; a later use opens it again (and prunes, as every open does)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- the database ----------------------------------------------------------------------

    @contextlib.contextmanager
    def use(self, *, write: bool = False, synced: bool = True) -> Iterator[sqlite3.Connection]:
        """The connection under the lock; a write is one immediate transaction, on disk when
        it commits unless not `synced` (then a power cut may lose it, never corrupt the
        database: WAL at synchronous=NORMAL). Any SQLite or file system failure is a
        JournalError naming the file."""
        with self._lock:
            try:
                db = self._open()
                if not write:
                    yield db
                    return
                if not synced:
                    db.execute("PRAGMA synchronous=NORMAL")
                try:
                    db.execute("BEGIN IMMEDIATE")
                    try:
                        yield db
                    except BaseException:
                        db.execute("ROLLBACK")
                        raise
                    db.execute("COMMIT")
                finally:
                    if not synced:
                        db.execute("PRAGMA synchronous=FULL")
            except (sqlite3.Error, OSError) as exc:
                raise JournalError(f"the memory history {self.db_path}: {exc}") from None

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.db_path, timeout=10, isolation_level=None,
                                 check_same_thread=False)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=FULL")  # an intent is on disk before the rename
                db.executescript(_SCHEMA)
                if db.execute("PRAGMA user_version").fetchone()[0] < VERSION:
                    upgrade(db)
            except BaseException:
                db.close()
                raise
            self._db = db
            self._prune(db)
        return self._db

    def _prune(self, db: sqlite3.Connection) -> None:
        """Records past keep_days, pending changes past pending_days, then the blobs no record
        uses any more: swept only when a change or a pending one went, so that opening a
        journal with a long history reads no manifest. (The blobs of a rejected change or of
        a dropped intent go with the next such sweep.)"""
        now = self.now()
        self._pruned = now
        with contextlib.suppress(sqlite3.OperationalError):  # busy: the next open prunes
            db.execute("BEGIN IMMEDIATE")
            gone = 0
            if self.keep_days:
                gone += db.execute("DELETE FROM changes WHERE done = 1 AND time < ?",
                                   (iso(now - timedelta(days=self.keep_days)),)).rowcount
                db.execute("DELETE FROM runs WHERE time < ?",
                           (iso(now - timedelta(days=self.keep_days)),))
            if self.pending_days:
                gone += db.execute("DELETE FROM pending WHERE time < ?",
                                   (iso(now - timedelta(days=self.pending_days)),)).rowcount
            if gone:
                self.sweep(db)
            db.execute("COMMIT")

    def prune(self) -> None:
        """Drop what is past its days now (opening the journal does it too)."""
        with self.use() as db:
            if self._pruned is None or self._pruned < self.now() - timedelta(seconds=1):
                self._prune(db)

    def sweep(self, db: sqlite3.Connection) -> None:
        """Drop the blobs no record uses any more."""
        used = self._used_blobs(db)
        stored = {h for (h,) in db.execute("SELECT hash FROM blobs")}
        db.executemany("DELETE FROM blobs WHERE hash = ?", [(h,) for h in stored - used])

    def _used_blobs(self, db: sqlite3.Connection) -> set[str]:
        states = recorded_states(db)
        used = {state.partition(":")[2] for state in states}
        for state in states:  # each folder's manifest once, however many records name it
            if state.startswith(DIR):
                row = db.execute("SELECT data FROM blobs WHERE hash = ?",
                                 (state[len(DIR):],)).fetchone()
                if row is not None:
                    used.update(json.loads(row[0])["files"].values())
        return used

    def blob(self, h: str) -> bytes:
        """The bytes stored under a hash."""
        with self.use() as db:
            row = db.execute("SELECT data FROM blobs WHERE hash = ?", (h,)).fetchone()
        if row is None:
            raise JournalError(f"the memory history {self.db_path} lacks content {h[:12]}")
        return bytes(row[0])

    def manifest_of(self, state: str) -> dict[str, Any]:
        return manifest(state, self.blob)

    def redacted(self, state: str | None) -> int:
        """How many secrets the contents a state names lost when they were stored (what
        putting the state back cannot restore)."""
        if state is None:
            return 0
        hashes = [state[len(NOTE):]] if state.startswith(NOTE) else list(
            self.manifest_of(state)["files"].values())
        with self.use() as db:
            return sum(n for h in hashes for (n,) in db.execute(
                "SELECT redacted FROM blobs WHERE hash = ?", (h,)))

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
        """Journal the change (scope, root, path) as an intent, yield its id for the caller
        to make it, then mark it done. A caller that fails settles it by `current()`: the
        path as it was means nothing happened. `releases` names the held change this one
        makes: it is dropped with the change's completion, never before."""
        scope, root, path = where
        change_id = new_id("chg")
        rows = self._blob_rows(before, after)
        with self.use(write=True) as db:
            self._store_blobs(db, rows)
            db.execute(
                f"INSERT INTO changes({CHANGE_COLUMNS.removeprefix('seq, ')}, done, releases) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,0,?)",
                (change_id, iso(self.now()), scope, str(root), path, action, before.state,
                 after.state, source.surface, source.session_id, source.task_id,
                 source.message, undoes, releases),
            )
        crash_point("after_journal")
        try:
            yield change_id
        except BaseException:
            with contextlib.suppress(JournalError, OSError):
                self._settle(change_id, before.state, current().state)
            raise
        crash_point("after_note")
        # Unsynced: the next synced commit takes it to disk, and one lost to a power cut
        # leaves the intent, which the next writer settles as it would a crash's.
        with contextlib.suppress(JournalError):  # the intent stays; the next writer settles it
            with self.use(write=True, synced=False) as db:
                _complete(db, change_id)

    def _settle(self, change_id: str, before: str | None, now_state: str | None) -> None:
        with self.use(write=True) as db:
            if now_state == before:
                db.execute("DELETE FROM changes WHERE id = ?", (change_id,))
            else:
                _complete(db, change_id)

    def _blob_rows(self, *captured: Captured) -> list[tuple[str, bytes, int]]:
        """The blobs the states name that are not stored yet, as rows: a note's contents
        redacted (outside any transaction: a large folder takes a while), a manifest or text
        redacted already as is."""
        wanted = {h: (data, c.redacted or c.state == DIR + h)
                  for c in captured for h, data in c.blobs.items()}
        with self.use() as db:
            known = {h for h in wanted
                     if db.execute("SELECT 1 FROM blobs WHERE hash = ?", (h,)).fetchone()}
        return [(h, data, 0) if as_is else (h, *redact_bytes(data))
                for h, (data, as_is) in wanted.items() if h not in known]

    def _store_blobs(self, db: sqlite3.Connection, rows: list[tuple[str, bytes, int]]) -> None:
        db.executemany(INSERT_BLOB, rows)

    def recover(self, root: Path, current: Callable[[str], Captured]) -> int:
        """Settle the intents a dead process left on root; call it holding the root's lock.
        current(path) is what path holds now. How many it settled."""
        with self.use() as db:
            intents = db.execute("SELECT id, path, before FROM changes WHERE root = ? AND "
                                 "done = 0", (str(root),)).fetchall()
        for change_id, path, before in intents:
            self._settle(change_id, before, current(path).state)
        return len(intents)

    def has_intents(self, root: Path) -> bool:
        """Whether a change of root is journaled but not marked done (a writer died, or is
        writing now)."""
        with self.use() as db:
            return db.execute("SELECT 1 FROM changes WHERE root = ? AND done = 0 LIMIT 1",
                              (str(root),)).fetchone() is not None

    # -- reading the history ---------------------------------------------------------------

    def change(self, change_id: str) -> Change | None:
        with self.use() as db:
            row = db.execute(f"SELECT {CHANGE_COLUMNS} FROM changes WHERE id = ? AND done = 1",
                             (change_id,)).fetchone()
        return Change.from_row(row) if row else None

    def changes(
        self,
        roots: Iterable[Path],
        path: str | None = None,
        limit: int = 50,
        *,
        task_id: str | None = None,
        session_id: str | None = None,
    ) -> list[Change]:
        """Done changes of the roots, newest first: touching path (when given), of a task."""
        dirs = [str(r) for r in roots]
        where = [f"root IN ({','.join('?' * len(dirs))})", "done = 1"]
        params: list[Any] = list(dirs)
        if task_id is not None:
            where.append("task_id = ?")
            params.append(task_id)
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        if path:
            # The path itself, what is under it, and the folders holding it.
            ancestors = ancestors_of(path)
            where.append(f"(path = ? OR path LIKE ? ESCAPE '\\' OR path IN "
                         f"({','.join('?' * len(ancestors))}))")
            params += [path, like_prefix(path), *ancestors]
        sql = (f"SELECT {CHANGE_COLUMNS} FROM changes WHERE {' AND '.join(where)} "
               "ORDER BY seq DESC")
        if limit > 0:
            sql += f" LIMIT {int(limit)}"
        with self.use() as db:
            return [Change.from_row(r) for r in db.execute(sql, params)]

    def later(self, change: Change) -> list[Change]:
        """The done changes after `change` that touched its path, oldest first (a purge
        touched no file)."""
        ancestors = ancestors_of(change.path)
        with self.use() as db:
            rows = db.execute(
                f"SELECT {CHANGE_COLUMNS} FROM changes WHERE root = ? AND seq > ? AND done = 1 "
                f"AND action != 'purge' AND (path = ? OR path LIKE ? ESCAPE '\\' OR path IN "
                f"({','.join('?' * len(ancestors))})) ORDER BY seq",
                (change.root, change.seq, change.path, like_prefix(change.path), *ancestors),
            ).fetchall()
        return [Change.from_row(r) for r in rows]

    def last_of(self, root: Path, path: str) -> Change | None:
        """The last done change that left path as it is (its own, or a folder's holding it)."""
        return self.last_of_each([(root, path)])[0][0]

    def last_of_each(
        self, notes: Sequence[tuple[Path, str]]
    ) -> tuple[list[Change | None], dict[str, bytes]]:
        """`last_of` for each (root, path), in one query (a search's hits share it), and the
        manifests of the folder states those changes left, by hash."""
        candidates = {(str(root), c) for root, path in notes for c in (path, *ancestors_of(path))}
        if not candidates:
            return [], {}
        pairs = sorted(candidates)
        with self.use() as db:
            # The last change of each candidate path (an index search each), then below the
            # newest of a note's candidates.
            rows = db.execute(
                f"SELECT {CHANGE_COLUMNS}, blobs.data FROM changes LEFT JOIN blobs ON "
                f"after LIKE '{DIR}%' AND blobs.hash = substr(after, {len(DIR) + 1}) "
                "WHERE seq IN (SELECT (SELECT max(seq) FROM changes WHERE root = "
                "wanted.column1 AND path = wanted.column2 AND done = 1 AND action != 'purge') "
                f"FROM (VALUES {','.join(['(?,?)'] * len(pairs))}) AS wanted)",
                [v for pair in pairs for v in pair],
            ).fetchall()
        last: dict[tuple[str, str], Change] = {}
        manifests: dict[str, bytes] = {}
        for row in rows:
            change = Change.from_row(row[:-1])
            last[(change.root, change.path)] = change
            if row[-1] is not None and change.after is not None:
                manifests[change.after[len(DIR):]] = bytes(row[-1])
        found: list[Change | None] = []
        for root, path in notes:
            known = [last[key] for c in (path, *ancestors_of(path))
                     if (key := (str(root), c)) in last]
            found.append(max(known, key=lambda c: c.seq) if known else None)
        return found, manifests


INSERT_BLOB = "INSERT OR IGNORE INTO blobs(hash, data, redacted) VALUES (?, ?, ?)"


def _complete(db: sqlite3.Connection, change_id: str) -> None:
    """Mark a change done, and drop the held change it made, in the caller's transaction."""
    db.execute("DELETE FROM pending WHERE id = (SELECT releases FROM changes WHERE id = ?)",
               (change_id,))
    db.execute("UPDATE changes SET done = 1 WHERE id = ?", (change_id,))


def ancestors_of(path: str) -> list[str]:
    """The folders holding path: `a/b/c.md` gives `a`, `a/b` (and "" for the root itself)."""
    parts = path.split("/")
    return ["", *("/".join(parts[:i]) for i in range(1, len(parts)))]


def like_prefix(path: str) -> str:
    escaped = path.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "/%"
