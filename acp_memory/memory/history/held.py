"""The changes held for approval (`memory.review: ask`, a tidy run's proposals): kept in the
journal's `pending` table, with the reason each was proposed and the other paths it makes with
it (all or none), until approved, rejected or past `pending_days`."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from acp_memory.memory.history.records import (
    HELD_COLUMNS,
    ChangeSource,
    Held,
    HeldPart,
    new_id,
    parts_json,
)
from acp_memory.memory.history.states import Captured
from acp_memory.timestamps import Now, iso

# One more path of a held change as it is held: (path, action, before, after).
Part = tuple[str, str, Captured, Captured]


def held_parts(parts: Sequence[Part]) -> tuple[HeldPart, ...]:
    """The parts as a held change keeps them (their states)."""
    return tuple(HeldPart(path, action, before.state, after.state)
                 for path, action, before, after in parts)


class HeldChanges:
    """The journal's methods for held changes (`Journal` is one)."""

    now: Now

    def use(
        self, *, write: bool = False, synced: bool = True
    ) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def prune(self) -> None:
        raise NotImplementedError

    def _blob_rows(self, *captured: Captured) -> list[tuple[str, bytes, int]]:
        raise NotImplementedError

    def _store_blobs(self, db: sqlite3.Connection, rows: list[tuple[str, bytes, int]]) -> None:
        raise NotImplementedError

    def hold(self, where: tuple[str, Path, str], action: str, before: Captured,
             after: Captured, source: ChangeSource, *, reason: str | None = None,
             parts: Sequence[Part] = ()) -> Held:
        """Keep a change for the user to approve (pending_days at most), with the reason it
        was proposed and the other paths of the root it makes with it (all or none)."""
        scope, root, path = where
        held = Held(new_id("pnd"), iso(self.now()), scope, str(root), path, action,
                    before.state, after.state, source, reason, held_parts(parts))
        rows = self._blob_rows(before, after, *(c for p in parts for c in (p[2], p[3])))
        with self.use(write=True) as db:
            self._store_blobs(db, rows)
            db.execute(f"INSERT INTO pending({HELD_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       (held.id, held.time, scope, str(root), path, action, before.state,
                        after.state, source.surface, source.session_id, source.task_id,
                        source.message, reason, parts_json(held.parts)))
        return held

    def held(self, *, session_id: str | None = None) -> list[Held]:
        """The changes waiting for approval, oldest first (of one session when given)."""
        self.prune()
        sql = f"SELECT {HELD_COLUMNS} FROM pending"
        params: tuple[str, ...] = ()
        if session_id is not None:
            sql += " WHERE session_id = ?"
            params = (session_id,)
        with self.use() as db:
            return [Held.from_row(r) for r in db.execute(sql + " ORDER BY time, rowid", params)]

    def held_one(self, pending_id: str) -> Held | None:
        self.prune()
        with self.use() as db:
            row = db.execute(f"SELECT {HELD_COLUMNS} FROM pending WHERE id = ?",
                             (pending_id,)).fetchone()
        return Held.from_row(row) if row else None

    def release(self, pending_id: str) -> bool:
        """Forget a held change (applied or rejected); False when it was not held."""
        with self.use(write=True) as db:
            return db.execute("DELETE FROM pending WHERE id = ?", (pending_id,)).rowcount > 0
