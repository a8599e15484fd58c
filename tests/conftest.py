from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Test helpers (harness, fake servers, schema checker) live beside the tests.
sys.path.insert(0, str(Path(__file__).parent))

from acp_memory.config import Config, Paths

# The suite starts some 800 Python processes (agents, fake servers), each importing the package
# from its sources. Where the environment says PYTHONDONTWRITEBYTECODE, every one of them would
# compile them again, and each pytest worker would rewrite every test module's asserts again:
# a fifth of the suite's CPU. The suite's own processes keep their bytecode (__pycache__ is
# ignored by git), whatever the environment says.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """A config-less run picks its model from these keys: a developer's own must not send the
    tests (or the processes they start) to a real provider."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        # setenv first, so that one a test's <home>/.env loads is undone after it too.
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    """A private home, sessions folder and project folder for one test."""
    home = tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    return Paths(
        home=home,
        config_file=home / "config.yaml",
        sessions_dir=home / "sessions",
        cwd=project,
    )


@pytest.fixture
def cfg() -> Config:
    return Config()


@pytest.fixture(scope="session")
def pg_server():
    """One real PostgreSQL server for this pytest process (see pgserver.py); a machine
    without the server's binaries skips the tests that need it, unless
    ACP_MEMORY_PG_TESTS=required (CI), which fails them."""
    import pgserver

    if (why := pgserver.unavailable()) is not None:
        if os.environ.get(pgserver.SKIP_ENV) == "required":
            pytest.fail(why)
        pytest.skip(why)
    server = pgserver.start_server()
    try:
        yield server
    finally:
        pgserver.remove(server)


@pytest.fixture(scope="session")
def pg_database(pg_server) -> str:
    """The DSN of this pytest process's database on its server."""
    return pg_server.create_database()


@pytest.fixture
def pg_dsn(pg_database: str):
    """The worker's database as new: the `acp_memory` schema dropped with everything in it
    (the test's first connect makes it again) and every connection of earlier tests ended,
    this process's pools with them: a tenth of the cost of a new database per test."""
    import pgserver

    from acp_memory.memory.shared.root import close_all

    close_all()
    pgserver.reset(pg_database)
    yield pg_database
    close_all()
