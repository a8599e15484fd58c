"""What the journal keeps of memory runs besides changes: when a run last read each note
(`notes stale`), and each run's cost (`notes log --cost`), written together at a run's end in
one transaction without a sync of its own."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_memory.timestamps import Now, iso

RUN_COST_KEYS = ("modelCalls", "inputTokens", "outputTokens", "cachedReadTokens",
                 "cachedWriteTokens", "durationMs")


@dataclass(frozen=True)
class RunCost:
    """A memory run's cost as the journal sums it: its session, its task, and the counts
    by RUN_COST_KEYS (a missing one is 0)."""

    session_id: str
    task_id: str
    cost: dict[str, int]


class RunRecords:
    """The journal's methods for read stamps and run costs (`Journal` is one)."""

    now: Now

    def use(
        self, *, write: bool = False, synced: bool = True
    ) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def mark_reads(self, stamps: Iterable[tuple[Path, str, str]],
                   run: RunCost | None = None) -> None:
        """Memory runs read these notes (root, path, ISO time), and with `run` that run's cost:
        one transaction without a sync of its own. A stamp lost in a power cut only makes
        `notes stale` list a note; a cost lost only leaves the run out of `notes log --cost`
        (its task record, synced when the run is sealed, still has it)."""
        rows = [(str(root), path, when) for root, path, when in stamps]
        if not rows and run is None:
            return
        with self.use(write=True, synced=False) as db:
            db.executemany("INSERT INTO reads(root, path, time) VALUES (?, ?, ?) ON CONFLICT "
                           "(root, path) DO UPDATE SET time = max(time, excluded.time)", rows)
            if run is not None:
                db.execute("INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?)",
                           (run.task_id, run.session_id, iso(self.now()),
                            *(int(run.cost.get(k, 0)) for k in RUN_COST_KEYS)))

    def reads(self, root: Path) -> dict[str, str]:
        """When a memory run last read each note of root."""
        with self.use() as db:
            return dict(db.execute("SELECT path, time FROM reads WHERE root = ?", (str(root),)))

    def record_run(self, session_id: str, task_id: str, cost: dict[str, int]) -> None:
        """A memory run's cost (modelCalls, inputTokens, ...), for `notes log --cost`."""
        self.mark_reads((), RunCost(session_id, task_id, cost))

    def costs_per_day(self, limit_days: int = 0) -> list[dict[str, Any]]:
        """The memory runs' cost summed per UTC day, newest first."""
        sql = ("SELECT substr(time, 1, 10) AS day, count(*), sum(model_calls), "
               "sum(input_tokens), sum(output_tokens), sum(cached_read_tokens), "
               "sum(cached_write_tokens), sum(duration_ms) FROM runs GROUP BY day "
               "ORDER BY day DESC")
        if limit_days > 0:
            sql += f" LIMIT {int(limit_days)}"
        names = ("day", "runs", "modelCalls", "inputTokens", "outputTokens", "cachedReadTokens",
                 "cachedWriteTokens", "durationMs")
        with self.use() as db:
            return [dict(zip(names, row, strict=True)) for row in db.execute(sql)]
