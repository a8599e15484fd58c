"""A shared project's changes held for approval (`memory.review: ask`), kept on the team's
server so that anyone on the team may approve or reject them, from any machine."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

from acp_memory.memory.history.journal import Part, held_parts
from acp_memory.memory.history.records import ChangeSource, Held, new_id, parts_of
from acp_memory.memory.history.states import Captured
from acp_memory.memory.shared.history import source_of
from acp_memory.memory.shared.schema import SCHEMA
from acp_memory.memory.shared.tables import SCOPE, ProjectTables, lock_project, signed
from acp_memory.timestamps import iso

_HELD = "id, time, path, action, before, after, source, reason, parts"


class HeldChanges(ProjectTables):
    """The held changes of a shared journal (see the module's docstring)."""

    def hold(self, where: tuple[str, Path, str], action: str, before: Captured,
             after: Captured, source: ChangeSource, *, reason: str | None = None,
             parts: Sequence[Part] = ()) -> Held:
        """Keep a change for someone on the team to approve (pending_days at most), with its
        reason and the other paths it makes with it."""
        _, _, path = where
        source = signed(source)
        held = Held(new_id("pnd"), iso(self.now()), SCOPE, str(self.root), path, action,
                    before.state, after.state, source, reason, held_parts(parts))
        with self._conn() as conn:
            lock_project(conn, self.key)  # against a sweep of the blobs it relies on
            self._store_blobs(conn, before, after, *(c for p in parts for c in (p[2], p[3])))
            conn.execute(f"INSERT INTO {SCHEMA}.held(id, project, time, path, action, before, "
                         "after, source, reason, parts) VALUES (%s, %s, %s, %s, %s, %s, %s, "
                         "%s, %s, %s)",
                         (held.id, self.key, self.now(), path, action, before.state,
                          after.state, Jsonb(source.as_json()), reason,
                          Jsonb([p.as_json() for p in held.parts]) if held.parts else None))
        return held

    def _held(self, row: Sequence[Any]) -> Held:
        pid, time, path, action, before, after, source, reason, parts = row
        return Held(pid, iso(time), SCOPE, str(self.root), path, action, before, after,
                    source_of(source), reason, parts_of(parts))

    def held(self, *, session_id: str | None = None) -> list[Held]:
        """The changes waiting for approval, oldest first (of one session when given)."""
        self.prune()
        sql = f"SELECT {_HELD} FROM {SCHEMA}.held WHERE project = %s"
        params: list[Any] = [self.key]
        if session_id is not None:
            sql += " AND source->>'sessionId' = %s"
            params.append(session_id)
        with self._conn() as conn:
            return [self._held(r) for r in conn.execute(sql + " ORDER BY time, id", params)]

    def held_one(self, pending_id: str) -> Held | None:
        self.prune()
        with self._conn() as conn:
            row = conn.execute(f"SELECT {_HELD} FROM {SCHEMA}.held WHERE project = %s AND "
                               "id = %s", (self.key, pending_id)).fetchone()
        return self._held(row) if row else None

    def release(self, pending_id: str) -> bool:
        """Forget a held change (applied or rejected); False when it was not held."""
        with self._conn() as conn:
            return conn.execute(f"DELETE FROM {SCHEMA}.held WHERE project = %s AND id = %s",
                                (self.key, pending_id)).rowcount > 0
