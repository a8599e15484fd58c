"""The whole-path purge: every record of a path dropped from the journal, held changes
included, the path left out of the records of the folders holding it, the contents no record
uses any more swept, and the purge itself recorded, without content."""

from __future__ import annotations

from pathlib import Path

from acp_memory.memory.history.journal import (
    CHANGE_COLUMNS,
    INSERT_BLOB,
    Journal,
    ancestors_of,
    like_prefix,
)
from acp_memory.memory.history.records import ChangeSource, new_id
from acp_memory.memory.history.states import DIR, without
from acp_memory.timestamps import iso


def purge(
    journal: Journal, where: tuple[str, Path, str], source: ChangeSource
) -> tuple[int, str | None]:
    """Drop every record of path (a folder's: of everything under it; the root's: all),
    held changes included, leave it out of the records of the folders holding it, sweep
    the contents no record uses any more, and record the purge itself, without content.
    How many records were dropped or trimmed, and the purge's id (None when none was)."""
    scope, root, path = where
    mine, params = ("(path = ? OR path LIKE ? ESCAPE '\\')", [path, like_prefix(path)]
                    ) if path else ("1", [])
    with journal.use(write=True) as db:
        count = sum(db.execute(f"DELETE FROM {table} WHERE root = ? AND {mine} "
                               "AND action != 'purge'",  # earlier purges hold no content
                               (str(root), *params)).rowcount
                    for table in ("changes", "pending"))
        holders = ancestors_of(path) if path else []
        rows = db.execute(
            f"SELECT id, path, before, after FROM changes WHERE root = ? AND path IN "
            f"({','.join('?' * len(holders))})", (str(root), *holders)).fetchall()
        for change_id, folder_path, *states in rows:
            inner = path[len(folder_path):].lstrip("/")
            trimmed = [without(s, inner, journal.blob) if s and s.startswith(DIR) else None
                       for s in states]
            if all(t is None or t.state == s for t, s in zip(trimmed, states, strict=True)):
                continue
            db.executemany(INSERT_BLOB, [(h, data, 0) for t in trimmed if t
                                          for h, data in t.blobs.items()])
            before, after = (t.state if t else s for t, s in zip(trimmed, states,
                                                                 strict=True))
            db.execute("UPDATE changes SET before = ?, after = ? WHERE id = ?",
                       (before, after, change_id))
            count += 1
        if not count:
            return 0, None
        journal.sweep(db)
        purge_id = new_id("chg")
        db.execute(
            f"INSERT INTO changes({CHANGE_COLUMNS.removeprefix('seq, ')}, done) "
            "VALUES (?,?,?,?,?,?,NULL,NULL,?,?,?,?,NULL,1)",
            (purge_id, iso(journal.now()), scope, str(root), path, "purge", source.surface,
             source.session_id, source.task_id, source.message))
    return count, purge_id
