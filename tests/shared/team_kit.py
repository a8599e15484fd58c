"""A team on one PostgreSQL database: two homes and two clones of one repository (the same
origin remote), each member's `acp-memory` processes started for real, and the database read
directly to check what they left there."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psycopg
from gitrepo import git_repo

from acp_memory.memory.shared.schema import SCHEMA
from acp_memory.memory.watch import Watcher

REPO = Path(__file__).resolve().parents[2]
# The HTTP tests' kit (a real `acp-memory http` process) lives beside them, where pytest puts
# it on sys.path only when it collects one of them.
sys.path.append(str(REPO / "tests" / "http"))
from httpkit import http_process  # noqa: E402

__all__ = ["http_process"]  # for the team tests, with the rest of this kit
REMOTE = "git@github.com:Team/Repo.git"
KEY = "github.com/team/repo"  # REMOTE normalised: what both clones share
# The DSN carries it: a password must never reach an output, a log or a file.
PASSWORD = "pw-never-shown-4c1e"
ENV = "ACP_MEMORY_PG"  # config.yaml names the DSN through it, as the README shows
BOUND_S = 60  # a process's run on a busy machine
CONFIG = """\
memory:
  enable: true
  wait_seconds: 30
  shared:
    dsn: "${ACP_MEMORY_PG}"
"""


def with_password(dsn: str) -> str:
    """The test server trusts every local connection: a password in the DSN is never asked
    for, so it can stand for the one a real team's DSN carries."""
    return dsn.replace("postgresql://postgres@", f"postgresql://postgres:{PASSWORD}@", 1)


@dataclass
class Member:
    """One developer's machine: an acp-memory home and a clone of the team's repository."""

    name: str
    home: Path
    cwd: Path

    @property
    def copy(self) -> Path:
        """The local copy of the team's notes this member's processes keep (the contract's
        `<home>/cache/shared/<sha256 of key>/notes/`)."""
        digest = hashlib.sha256(KEY.encode()).hexdigest()
        return self.home / "cache" / "shared" / digest / "notes"

    def notes(self, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        """`acp-memory notes *argv` as a process of its own, in this member's clone."""
        return subprocess.run(
            [sys.executable, "-m", "acp_memory", "notes", *argv, "--home", str(self.home),
             "--cwd", str(self.cwd), "--log-level", "warning"],
            input=stdin, capture_output=True, text=True, timeout=BOUND_S, cwd=self.cwd,
        )

    async def anotes(self, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        """`notes` from an async test, in a worker thread."""
        return await anyio.to_thread.run_sync(lambda: self.notes(*argv, stdin=stdin))

    def write(self, path: str, text: str) -> None:
        """`notes write path` with text on stdin; it must succeed."""
        done = self.notes("write", path, stdin=text)
        assert done.returncode == 0, done.stderr

    def show(self, path: str) -> str:
        done = self.notes("show", path)
        assert done.returncode == 0, done.stderr
        return done.stdout


def clone(folder: Path) -> Path:
    """A clone of the team's repository: a git folder whose origin is REMOTE (no network)."""
    return git_repo(folder, REMOTE)


def member(base: Path, name: str, config: str = CONFIG) -> Member:
    """A home with config.yaml naming the shared DSN by ${ACP_MEMORY_PG}, and a clone."""
    home = base / name / "home"
    home.mkdir(parents=True)
    (home / "config.yaml").write_text(config)
    return Member(name, home, clone(base / name / "repo"))


def team(base: Path, dsn: str, monkeypatch: Any) -> tuple[Member, Member]:
    """Alice and Bob on one database: ACP_MEMORY_PG (with a password) for every process the
    test starts."""
    monkeypatch.setenv(ENV, with_password(dsn))
    return member(base, "alice"), member(base, "bob")


def sql(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """The rows of one query, straight from the database (the test's own connection)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query.replace("{S}", SCHEMA), params).fetchall()


def history_of(dsn: str, path: str) -> list[tuple[int, str, str | None, str | None]]:
    """(seq, action, before, after) of every recorded change of path, oldest first."""
    return [(r[0], r[1], r[2], r[3]) for r in sql(
        dsn, "SELECT seq, action, before, after FROM {S}.history WHERE project = %s AND "
        "path = %s ORDER BY seq", KEY, path)]


def note_row(dsn: str, path: str) -> tuple[str, str] | None:
    """(body, sha256) of path in the notes table, or None."""
    rows = sql(dsn, "SELECT body, sha256 FROM {S}.notes WHERE project = %s AND path = %s",
               KEY, path)
    return (rows[0][0], rows[0][1]) if rows else None


def blob(dsn: str, state: str) -> bytes:
    """The stored contents a `note:<sha256>` state names."""
    digest = state.removeprefix("note:")
    (row,) = sql(dsn, "SELECT data FROM {S}.blobs WHERE project = %s AND hash = %s", KEY, digest)
    return bytes(row[0])


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@contextlib.contextmanager
def watching(folder: Path) -> Iterator[Callable[[Callable[[], bool]], Any]]:
    """`await until(done)`: wait, bounded, for `done()` to hold about files another process
    writes into folder, woken by inotify (nothing to wait on in a process we cannot signal
    but the folder itself). The watch is set before the first check, so nothing is missed."""
    watcher = Watcher()
    try:
        watcher.add(str(folder), "")

        async def until(done: Callable[[], bool]) -> None:
            with anyio.fail_after(10):
                while not done():
                    await anyio.wait_readable(watcher.fileno())
                    watcher.drain()

        yield until
    finally:
        watcher.close()


def env_for_children() -> dict[str, str]:
    """The environment a test's own child scripts get: the repo importable, tests/ too."""
    path = os.pathsep.join([str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}
