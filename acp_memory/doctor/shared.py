"""`doctor`'s findings on memory.shared: the DSN (masked: a password never appears), the
project key or why there is none, the sslmode warning; with --online, a connect naming the
server, the database, the schema version and how many notes the key holds."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_memory.config import Config
from acp_memory.doctor.findings import Finding
from acp_memory.memory.shared.checks import shared_config_warnings
from acp_memory.memory.shared.dsn import DsnError, mask_dsn
from acp_memory.memory.shared.key import project_key, shared_label

if TYPE_CHECKING:
    import psycopg


def shared_findings(cfg: Config, cwd: Path) -> list[Finding]:
    """What a start would say of memory.shared, without the network."""
    dsn = cfg.memory.shared.dsn
    try:
        warnings = [Finding("warning", line) for line in shared_config_warnings(cfg)]
    except DsnError as exc:
        return [Finding("error", str(exc))]
    if not dsn:
        return warnings
    key, why = project_key(cfg.memory.shared.project, cwd)
    where = f"memory.shared: {mask_dsn(dsn)}"
    if key is None:
        found = Finding("warning", f"{where}: no project key for {cwd}: {why}; the project "
                        "scope stays on disk")
    else:
        found = Finding("ok", f"{where}: the project scope of {cwd} is "
                        f"{shared_label('project', key)}")
    return [found, *warnings]


def shared_online_findings(cfg: Config, cwd: Path) -> list[Finding]:
    """Connect to the shared memory's server: its version, database, schema version, and the
    notes the cwd's key holds; an error line naming the DSN masked when it cannot be used."""
    dsn = cfg.memory.shared.dsn
    if not dsn:
        return []
    import psycopg

    from acp_memory.memory.shared.database import Database, SharedUnavailable
    from acp_memory.memory.shared.schema import SCHEMA, SchemaTooNew

    try:
        database = Database(dsn)  # its own: doctor closes it when done
    except DsnError:
        return []  # shared_findings said so
    key, _ = project_key(cfg.memory.shared.project, cwd)
    try:
        with database.connection() as conn:
            version = _one(conn, "SHOW server_version")
            name = _one(conn, "SELECT current_database()")
            schema = _one(conn, f"SELECT value FROM {SCHEMA}.meta WHERE key = 'schema_version'")
            notes = None if key is None else _one(
                conn, f"SELECT count(*) FROM {SCHEMA}.notes WHERE project = %s AND body IS NOT "
                "NULL", (key,))
    except SchemaTooNew as exc:  # a SharedUnavailable whose line names no database
        return [Finding("error", f"memory.shared {database.masked}: {exc}")]
    except SharedUnavailable as exc:
        return [Finding("error", str(exc))]
    except psycopg.Error as exc:
        return [Finding("error", f"memory.shared {database.masked}: "
                        f"{' '.join(str(exc).split())}")]
    finally:
        database.close()
    held = ("no project key here" if notes is None
            else f"project {key} holds {notes} note{'' if notes == 1 else 's'}")
    return [Finding("ok", f"memory.shared: {database.masked} is reachable: PostgreSQL "
                    f"{version}, database {name}, schema version {schema}; {held}")]


def _one(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    return row[0] if row else None
