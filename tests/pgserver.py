"""A real PostgreSQL server for the tests of the shared project root, started from the
machine's own binaries (Debian keeps them in /usr/lib/postgresql/<version>/bin, off PATH).

One server per pytest process (xdist worker), on a unix socket in a folder of its own, with
fsync off: the tests are about our transactions, not the disk. initdb refuses to run as root,
so as root the folder is given to the unprivileged `nobody` and the server runs as it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

SKIP_ENV = "ACP_MEMORY_PG_TESTS"  # "required": a missing server fails the tests, not skips them


def binaries() -> Path | None:
    """The newest installed server's bin folder, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parent.parent.name) if
                   Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


def unavailable() -> str | None:
    """Why these tests cannot run here, or None."""
    if binaries() is None:
        return "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin): apt install postgresql"
    return None


@dataclass
class PgServer:
    """A running server: its socket folder and how to stop it."""

    folder: Path
    bin: Path
    user: str | None  # the OS user it runs as (None: this one)
    # Sync to disk as a team's server does (bench/shared.py); the tests' server does not.
    durable: bool = False

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.folder}"

    def dsn_for(self, database: str) -> str:
        return f"postgresql://postgres@/{database}?host={self.folder}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=60)

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-l", str(self.folder / "log"),
                  "-w", "-o", f"-k {self.folder} -c listen_addresses='' -c max_connections=200"
                  + ("" if self.durable else
                     " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"),
                  "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", mode, "-w", "stop",
                  check=False)

    def create_database(self) -> str:
        """A fresh database of its own: a DSN to it in URL form (tests add to its query)."""
        return self.dsn_for(_created(self.dsn))


def new_database(admin_dsn: str) -> str:
    """A fresh database on the server admin_dsn reaches (as a user who may create one): a DSN
    to it."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(admin_dsn, dbname=_created(admin_dsn))


def _created(admin_dsn: str) -> str:
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return name


def start_server(*, durable: bool = False) -> PgServer:
    """initdb and start a server in a new folder under the system's temp folder (`durable`:
    with its syncs to disk, as a real server runs)."""
    bin_dir = binaries()
    assert bin_dir is not None, unavailable()
    folder = Path(tempfile.mkdtemp(prefix="acp-memory-pg-"))
    user = None
    if os.geteuid() == 0:
        user = "nobody"
        entry = pwd.getpwnam(user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    server = PgServer(folder, bin_dir, user, durable)
    server._run("initdb", "-D", str(folder / "data"), "-A", "trust", "-U", "postgres",
                "--no-sync", "-E", "UTF8", "--locale=C")
    server.start()
    return server


def remove(server: PgServer) -> None:
    server.stop("immediate")
    shutil.rmtree(server.folder, ignore_errors=True)


def reset(dsn: str) -> None:
    """Make dsn's database as new for the acp_memory schema: the other connections to it
    ended (a pool an earlier test left must not hold a lock the drop waits for), the schema
    dropped with its tables, triggers and all."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                     "datname = current_database() AND pid <> pg_backend_pid()")
        conn.execute("DROP SCHEMA IF EXISTS acp_memory CASCADE")
