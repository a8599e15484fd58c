"""A shared path's whole history dropped for the whole team (`notes purge`), by
`history/purge.py`'s rules: held changes included, the path left out of the records of the
folders holding it, the contents no record uses any more swept, the purge itself recorded
without content."""

from __future__ import annotations

from pathlib import Path

from acp_memory.memory.history.journal import ancestors_of, like_prefix
from acp_memory.memory.history.records import ChangeSource, new_id
from acp_memory.memory.history.states import DIR, without
from acp_memory.memory.shared.schema import SCHEMA
from acp_memory.memory.shared.tables import ProjectTables, lock_project, signed


class Purging(ProjectTables):
    """The purge of a shared journal (see the module's docstring)."""

    def purge(self, where: tuple[str, Path, str],
              source: ChangeSource) -> tuple[int, str | None]:
        """Drop every record of path (a folder's: of everything under it; the root's: all)
        for the whole team, held changes included, leave it out of the records of the
        folders holding it, sweep the contents no record uses any more, and record the purge
        itself, without content (`history/purge.py`'s rules). How many records were dropped
        or trimmed, and the purge's id (None when none was)."""
        _, _, path = where
        held = self._holding()
        with self._conn() as conn:
            if held is None:
                lock_project(conn, self.key)
            elif not held.locked:
                self._lock(held)
            mine, params = ("(path = %s OR path LIKE %s)", [path, like_prefix(path)]
                            ) if path else ("true", [])
            count = sum(conn.execute(f"DELETE FROM {SCHEMA}.{table} WHERE project = %s AND "
                                     f"{mine} AND action != 'purge'",
                                     (self.key, *params)).rowcount
                        for table in ("history", "held"))
            holders = ancestors_of(path) if path else []
            rows = conn.execute(f"SELECT id, path, before, after FROM {SCHEMA}.history WHERE "
                                "project = %s AND path = ANY(%s)",
                                (self.key, holders)).fetchall()
            for change_id, folder_path, *states in rows:
                inner = path[len(folder_path):].lstrip("/")
                trimmed = [without(s, inner, self.blob) if s and s.startswith(DIR) else None
                           for s in states]
                if all(t is None or t.state == s for t, s in zip(trimmed, states,
                                                                  strict=True)):
                    continue
                self._store_blobs(conn, *(t for t in trimmed if t))
                before, after = (t.state if t else s for t, s in zip(trimmed, states,
                                                                     strict=True))
                conn.execute(f"UPDATE {SCHEMA}.history SET before = %s, after = %s WHERE "
                             "id = %s", (before, after, change_id))
                count += 1
            if not count:
                return 0, None
            self._sweep(conn)
            purge_id = new_id("chg")
            seq = self._record(conn, purge_id, path, "purge", None, None, signed(source))
            if held is not None:  # caught up under the lock: the copy is at this seq now
                conn.commit()
                held.locked = False
                self.copy.applied(seq)
        return count, purge_id
