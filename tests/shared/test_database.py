"""The shared root's database: the one masked line for every way of not reaching the server,
the schema made once and a newer one refused, and a pool that outlives a restarted server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from acp_memory.memory.shared import database as database_module
from acp_memory.memory.shared.database import Database, SharedUnavailable, database_for
from acp_memory.memory.shared.dsn import DsnError
from acp_memory.memory.shared.schema import SCHEMA_VERSION, SchemaTooNew


@pytest.fixture
def opened() -> Iterator[list[Database]]:
    """Databases a test makes, closed after it (their pools hold threads)."""
    made: list[Database] = []
    yield made
    for database in made:
        database.close()


def _make(opened: list[Database], dsn: str) -> Database:
    database = Database(dsn)
    opened.append(database)
    return database


def _as_user(dsn: str, userinfo: str) -> str:
    return dsn.replace("postgresql://postgres@", f"postgresql://{userinfo}@")


def test_no_server_is_one_masked_line_naming_the_reason(
        tmp_path: Path, opened: list[Database]) -> None:
    database = _make(opened, f"postgresql://alice:s3cret@/notes?host={tmp_path}")
    with pytest.raises(SharedUnavailable) as caught, database.connection():
        pass
    text = str(caught.value)
    assert text.startswith(f"shared project memory postgresql://alice:***@/notes?host={tmp_path}"
                           ": cannot connect: ")
    assert "No such file or directory" in text
    assert "\n" not in text and "s3cret" not in text
    assert not database.online and database.last_error == text


def test_an_unknown_user_is_refused_with_the_servers_reason(
        pg_dsn: str, opened: list[Database]) -> None:
    database = _make(opened, _as_user(pg_dsn, "ghost:s3cret"))
    with pytest.raises(SharedUnavailable) as caught, database.connection():
        pass
    text = str(caught.value)
    assert 'role "ghost" does not exist' in text
    assert "postgresql://ghost:***@" in text
    assert "\n" not in text and "s3cret" not in text


def test_a_dsn_that_does_not_parse_is_a_config_error() -> None:
    with pytest.raises(DsnError):
        Database("postgresql://host/db?nosuchoption=1")


def test_the_schema_is_made_once_per_database(
        pg_dsn: str, opened: list[Database], monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = database_module.ensure_schema

    def counted(conn: psycopg.Connection) -> int:
        calls.append(conn)
        return real(conn)

    monkeypatch.setattr(database_module, "ensure_schema", counted)
    database = _make(opened, pg_dsn)
    for _ in range(3):
        with database.connection() as conn:
            row = conn.execute("SELECT value FROM acp_memory.meta WHERE key = 'schema_version'"
                               ).fetchone()
    assert row == (str(SCHEMA_VERSION),)
    assert len(calls) == 1
    assert database.online and database.last_error is None


def test_a_newer_schema_is_refused_in_one_line(pg_dsn: str, opened: list[Database]) -> None:
    with _make(opened, pg_dsn).connection() as conn:
        conn.execute("UPDATE acp_memory.meta SET value = '99' WHERE key = 'schema_version'")
        conn.commit()
    with pytest.raises(SchemaTooNew) as caught, _make(opened, pg_dsn).connection():
        pass
    assert str(caught.value) == (
        f"the database's acp_memory schema is version 99, newer than this acp-memory knows "
        f"({SCHEMA_VERSION}); upgrade acp-memory")


def test_a_connection_is_given_back_with_its_transaction_rolled_back(
        pg_dsn: str, opened: list[Database], caplog: pytest.LogCaptureFixture) -> None:
    database = _make(opened, pg_dsn)
    with caplog.at_level("WARNING", logger="psycopg.pool"):
        with database.connection() as conn:
            assert not conn.autocommit
            conn.execute("CREATE TABLE public.left_open(x int)")
        with database.connection() as conn:
            found = conn.execute("SELECT to_regclass('public.left_open')").fetchone()
    assert found == (None,)
    # Rolled back by us before it went back, not left for the pool to find (and warn of).
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg.pool")] == []


def test_a_connection_lost_mid_use_is_one_line_and_the_next_use_reconnects(
        pg_dsn: str, opened: list[Database]) -> None:
    database = _make(opened, pg_dsn)
    with pytest.raises(SharedUnavailable) as caught, database.connection() as conn:
        pid = conn.info.backend_pid
        with psycopg.connect(pg_dsn, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        conn.execute("SELECT 1")
    assert str(caught.value).startswith(f"shared project memory {database.masked}: cannot "
                                        "connect: ")
    assert not database.online
    with database.connection() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert database.online


def test_the_pool_survives_the_server_stopped_and_started(
        pg_server, pg_dsn: str, opened: list[Database]) -> None:
    database = _make(opened, pg_dsn)
    with database.connection() as conn:  # a pooled connection, idle in the pool after this
        conn.execute("SELECT 1")
    pg_server.stop()
    try:
        with pytest.raises(SharedUnavailable) as caught, database.connection():
            pass
        assert "cannot connect: " in str(caught.value) and not database.online
    finally:
        pg_server.start()  # pg_ctl -w: it takes connections once this returns
    with database.connection() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert database.online
    # Restarted between two uses: the pool's broken connection is not handed out.
    pg_server.stop()
    pg_server.start()
    with database.connection() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_one_database_per_dsn_per_process(tmp_path: Path) -> None:
    first = database_for(f"postgresql://a@/db?host={tmp_path}")
    try:
        assert database_for(f"postgresql://a@/db?host={tmp_path}") is first
        assert database_for(f"postgresql://b@/db?host={tmp_path}") is not first
    finally:
        database_module.close_all()
    assert database_for(f"postgresql://a@/db?host={tmp_path}") is not first
    database_module.close_all()
