"""The tables of the `acp_memory` schema, made on first connect, and the version check.

Every table is keyed by `project` (the project key). States, as the disk journal writes them
(`history/states.py`): NULL (nothing), `note:<sha256>` or `dir:<sha256 of a manifest>`; the
bytes behind each hash (redacted) are in `blobs`. A note's row holds its text and its hash; a
folder is a row of its own with no body.
"""

from __future__ import annotations

from typing import Any

from acp_memory.memory.shared.errors import SharedUnavailable

SCHEMA = "acp_memory"
# 2: held.reason and held.parts (a held change's reason and its other paths); DDL adds them
# to a version 1 schema, as it is written to run again over any earlier one.
SCHEMA_VERSION = 2
CHANNEL = "acp_memory_changes"  # NOTIFY payload: "<project> <seq>"

DDL = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.meta(key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS {SCHEMA}.notes(
    project text NOT NULL, path text NOT NULL,
    body text,                -- NULL: a folder
    sha256 text,              -- of the body's UTF-8 bytes; NULL for a folder
    updated_at timestamptz NOT NULL, updated_by text NOT NULL,
    PRIMARY KEY (project, path));
CREATE TABLE IF NOT EXISTS {SCHEMA}.blobs(
    project text NOT NULL, hash text NOT NULL, data bytea NOT NULL,
    redacted integer NOT NULL DEFAULT 0, PRIMARY KEY (project, hash));
CREATE TABLE IF NOT EXISTS {SCHEMA}.history(
    id text PRIMARY KEY, seq bigserial UNIQUE NOT NULL, project text NOT NULL,
    path text NOT NULL, action text NOT NULL, before text, after text,
    source jsonb NOT NULL, time timestamptz NOT NULL, undoes text, releases text);
-- A folder's rows are found by `path LIKE 'a/b/%'`: pattern ops serve that in any collation.
CREATE INDEX IF NOT EXISTS notes_under ON {SCHEMA}.notes(project, path text_pattern_ops);
CREATE INDEX IF NOT EXISTS history_at ON {SCHEMA}.history(project, path text_pattern_ops, seq);
CREATE INDEX IF NOT EXISTS history_after ON {SCHEMA}.history(project, seq);
CREATE INDEX IF NOT EXISTS history_of_task ON {SCHEMA}.history((source->>'taskId'));
CREATE TABLE IF NOT EXISTS {SCHEMA}.held(
    id text PRIMARY KEY, project text NOT NULL, time timestamptz NOT NULL, path text NOT NULL,
    action text NOT NULL, before text, after text, source jsonb NOT NULL);
ALTER TABLE {SCHEMA}.held ADD COLUMN IF NOT EXISTS reason text;
ALTER TABLE {SCHEMA}.held ADD COLUMN IF NOT EXISTS parts jsonb;
CREATE TABLE IF NOT EXISTS {SCHEMA}.embeddings(
    project text NOT NULL, path text NOT NULL, sha256 text NOT NULL, model text NOT NULL,
    dimensions integer NOT NULL, vector bytea NOT NULL,  -- float32, little-endian
    PRIMARY KEY (project, path, model, dimensions));
"""


class SchemaTooNew(SharedUnavailable):
    """The database holds a schema this build does not know; the message says so in a line.
    Unusable as a server out of reach is: reads answer from the local copy, writes refused."""


def ensure_schema(conn: Any) -> int:
    """Create the schema when missing (under an advisory lock, so that two first connects do
    not race), refuse a newer one; the version found. `conn` is a psycopg connection."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('acp_memory schema', 0))")
        found = conn.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND "
            "table_name = 'meta'", (SCHEMA,)).fetchone()
        if found:
            row = conn.execute(f"SELECT value FROM {SCHEMA}.meta WHERE key = 'schema_version'"
                               ).fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise SchemaTooNew(
                    f"the database's {SCHEMA} schema is version {version}, newer than this "
                    f"acp-memory knows ({SCHEMA_VERSION}); upgrade acp-memory")
            if version == SCHEMA_VERSION:
                return version
        conn.execute(DDL)
        conn.execute(f"INSERT INTO {SCHEMA}.meta VALUES ('schema_version', %s) ON CONFLICT "
                     "(key) DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))
    return SCHEMA_VERSION
