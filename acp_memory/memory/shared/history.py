"""Reading a shared project's history (`history/journal.py`'s readers, on PostgreSQL): one
change, the changes of a path, a task or a session, the changes after one, and the last change
of each note. Every Change names the local copy as its root and `project` as its scope."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from acp_memory.memory.history.journal import ancestors_of, like_prefix
from acp_memory.memory.history.records import Change, ChangeSource
from acp_memory.memory.history.states import DIR
from acp_memory.memory.shared.schema import SCHEMA
from acp_memory.memory.shared.tables import SCOPE, ProjectTables
from acp_memory.timestamps import iso

_CHANGE = "seq, id, time, path, action, before, after, source, undoes"


def source_of(value: Any) -> ChangeSource:
    """A history or held row's source (jsonb) as a ChangeSource."""
    data: dict[str, Any] = value if isinstance(value, dict) else json.loads(value or "{}")
    return ChangeSource(str(data.get("surface") or ""), data.get("sessionId"),
                        data.get("taskId"), data.get("message"), data.get("user"),
                        data.get("host"))


class HistoryReads(ProjectTables):
    """The readers of a shared journal's history (see the module's docstring)."""

    def _change(self, row: Sequence[Any]) -> Change:
        seq, cid, time, path, action, before, after, source, undoes = row
        return Change(int(seq), cid, iso(time), SCOPE, str(self.root), path, action, before,
                      after, source_of(source), undoes)

    def _ours(self, roots: Iterable[Path | str]) -> bool:
        return str(self.root) in {str(r) for r in roots}

    def change(self, change_id: str) -> Change | None:
        with self._conn() as conn:
            row = conn.execute(f"SELECT {_CHANGE} FROM {SCHEMA}.history WHERE project = %s "
                               "AND id = %s", (self.key, change_id)).fetchone()
        return self._change(row) if row else None

    def changes(
        self,
        roots: Iterable[Path],
        path: str | None = None,
        limit: int = 50,
        *,
        task_id: str | None = None,
        session_id: str | None = None,
    ) -> list[Change]:
        """Changes of the project (when the roots name its copy), newest first: touching
        path (when given), of a task, of a session."""
        if not self._ours(roots):
            return []
        self.prune()
        where = ["project = %s"]
        params: list[Any] = [self.key]
        if task_id is not None:
            where.append("source->>'taskId' = %s")
            params.append(task_id)
        if session_id is not None:
            where.append("source->>'sessionId' = %s")
            params.append(session_id)
        if path:
            where.append("(path = %s OR path LIKE %s OR path = ANY(%s))")
            params += [path, like_prefix(path), ancestors_of(path)]
        sql = (f"SELECT {_CHANGE} FROM {SCHEMA}.history WHERE {' AND '.join(where)} "
               "ORDER BY seq DESC")
        if limit > 0:
            sql += f" LIMIT {int(limit)}"
        with self._conn() as conn:
            return [self._change(r) for r in conn.execute(sql, params)]

    def later(self, change: Change) -> list[Change]:
        """The changes after `change` that touched its path, oldest first (a purge touched
        no file)."""
        if change.root != str(self.root):
            return []
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_CHANGE} FROM {SCHEMA}.history WHERE project = %s AND seq > %s AND "
                "action != 'purge' AND (path = %s OR path LIKE %s OR path = ANY(%s)) "
                "ORDER BY seq",
                (self.key, change.seq, change.path, like_prefix(change.path),
                 ancestors_of(change.path))).fetchall()
        return [self._change(r) for r in rows]

    def last_of(self, root: Path, path: str) -> Change | None:
        """The last change that left path as it is (its own, or a folder's holding it)."""
        return self.last_of_each([(root, path)])[0][0]

    def last_of_each(
        self, notes: Sequence[tuple[Path, str]]
    ) -> tuple[list[Change | None], dict[str, bytes]]:
        """`last_of` for each (root, path) in one query (another root's: None), and the
        manifests of the folder states those changes left, by hash."""
        mine = str(self.root)
        candidates = sorted({c for root, path in notes if str(root) == mine
                             for c in (path, *ancestors_of(path))})
        if not candidates:
            return [None] * len(notes), {}
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT DISTINCT ON (h.path) {', '.join('h.' + c for c in _CHANGE.split(', '))}"
                f", b.data FROM {SCHEMA}.history h LEFT JOIN {SCHEMA}.blobs b ON "
                f"b.project = h.project AND h.after LIKE '{DIR}%%' AND "
                f"b.hash = substr(h.after, {len(DIR) + 1}) WHERE h.project = %s AND "
                "h.path = ANY(%s) AND h.action != 'purge' ORDER BY h.path, h.seq DESC",
                (self.key, candidates)).fetchall()
        last: dict[str, Change] = {}
        manifests: dict[str, bytes] = {}
        for row in rows:
            change = self._change(row[:-1])
            last[change.path] = change
            if row[-1] is not None and change.after is not None:
                manifests[change.after[len(DIR):]] = bytes(row[-1])
        found: list[Change | None] = []
        for root, path in notes:
            known = [last[c] for c in (path, *ancestors_of(path)) if c in last]
            found.append(max(known, key=lambda c: c.seq)
                         if known and str(root) == mine else None)
        return found, manifests
