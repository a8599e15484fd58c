"""The one-time upgrade of a journal of an earlier version: the new columns, then (from
before version 1) every content it stored redacted. `VERSION` is the journal's current
version (its user_version)."""

from __future__ import annotations

import sqlite3

from acp_memory.memory.history.records import parts_of
from acp_memory.memory.history.states import DIR
from acp_memory.memory.redact import redact_bytes

# 1: contents redacted, blobs.redacted and changes.releases added.
# 2: pending.reason and pending.parts (a held change's reason and its other paths) added.
VERSION = 2
_COLUMNS = (("blobs", "redacted", "INTEGER NOT NULL DEFAULT 0"), ("changes", "releases", "TEXT"),
            ("pending", "reason", "TEXT"), ("pending", "parts", "TEXT"))


def recorded_states(db: sqlite3.Connection) -> set[str]:
    """Every state a change or a held change names (a merge's other paths' included)."""
    states = {s for pair in db.execute("SELECT before, after FROM changes UNION ALL "
                                       "SELECT before, after FROM pending") for s in pair if s}
    for (parts,) in db.execute("SELECT parts FROM pending WHERE parts IS NOT NULL"):
        states.update(s for part in parts_of(parts) for s in (part.before, part.after) if s)
    return states


def upgrade(db: sqlite3.Connection) -> None:
    """Bring a journal of an earlier version up to this one, once: the new columns, then
    every content it stored redacted (a manifest is kept as it is: it holds only names and
    hashes), in one transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        found = db.execute("PRAGMA user_version").fetchone()[0]
        if found < VERSION:  # not done meanwhile
            for table, column, kind in _COLUMNS:
                if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        if found < 1:  # contents were stored unredacted before version 1
            manifests = {s[len(DIR):] for s in recorded_states(db) if s.startswith(DIR)}
            for h, data in db.execute("SELECT hash, data FROM blobs").fetchall():
                if h not in manifests:
                    red, count = redact_bytes(bytes(data))
                    if count:
                        db.execute("UPDATE blobs SET data = ?, redacted = ? WHERE hash = ?",
                                   (red, count, h))
        if found < VERSION:
            db.execute(f"PRAGMA user_version = {VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
