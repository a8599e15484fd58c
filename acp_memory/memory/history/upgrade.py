"""The one-time upgrade of a journal of an earlier version: the new columns, then every
content it stored redacted. `VERSION` is the journal's current version (its user_version)."""

from __future__ import annotations

import sqlite3

from acp_memory.memory.history.states import DIR
from acp_memory.memory.redact import redact_bytes

# 1: contents redacted, blobs.redacted and changes.releases added.
VERSION = 1


def recorded_states(db: sqlite3.Connection) -> set[str]:
    """Every state a change or a held change names."""
    return {s for pair in db.execute("SELECT before, after FROM changes UNION ALL "
                                     "SELECT before, after FROM pending") for s in pair if s}


def upgrade(db: sqlite3.Connection) -> None:
    """Bring a journal of an earlier version up to this one, once: the new columns, then
    every content it stored redacted (a manifest is kept as it is: it holds only names and
    hashes), in one transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] < VERSION:  # not done meanwhile
            columns = {t: {row[1] for row in db.execute(f"PRAGMA table_info({t})")}
                       for t in ("blobs", "changes")}
            if "redacted" not in columns["blobs"]:
                db.execute("ALTER TABLE blobs ADD COLUMN redacted INTEGER NOT NULL DEFAULT 0")
            if "releases" not in columns["changes"]:
                db.execute("ALTER TABLE changes ADD COLUMN releases TEXT")
            manifests = {s[len(DIR):] for s in recorded_states(db) if s.startswith(DIR)}
            for h, data in db.execute("SELECT hash, data FROM blobs").fetchall():
                if h not in manifests:
                    red, count = redact_bytes(bytes(data))
                    if count:
                        db.execute("UPDATE blobs SET data = ?, redacted = ? WHERE hash = ?",
                                   (red, count, h))
            db.execute(f"PRAGMA user_version = {VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
