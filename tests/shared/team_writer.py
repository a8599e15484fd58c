"""A team member's process saving one shared note over and over, for the concurrency and
kill -9 tests: one process start for COUNT saves (a `notes write` each would cost a Python
start per save).

Usage: python team_writer.py HOME CWD WRITER COUNT PATH [DIE_AT]
The store is the one `acp-memory notes` opens for that home and cwd (config.yaml and all).
Prints "ready", waits for a line on stdin, then saves COUNT self-checking bodies
(memory/writer_child.py's `body_for`) to PATH, printing "saved <i>" after each. With DIE_AT,
save DIE_AT kills its own process (SIGKILL) at the commit of its database transaction: before
the server has the change (and so before the local copy, which never leads the server, does).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import psycopg
from memory.writer_child import body_for

from acp_memory.config import load_config, resolve_paths
from acp_memory.memory.store import MemoryStore


def die_at_commit() -> None:
    """Every commit from now on is a kill -9 of this process."""

    def commit(self: Any) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    psycopg.Connection.commit = commit  # type: ignore[method-assign]


def main() -> None:
    home, cwd, writer, count, path = sys.argv[1:6]
    die_at = int(sys.argv[6]) if len(sys.argv) > 6 else -1
    paths = resolve_paths(home=home, cwd=cwd)
    with MemoryStore.from_config(load_config(paths), paths) as store:
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(int(count)):
            if i == die_at:
                die_at_commit()
            store.write(path, body_for(int(writer), i))
            print(f"saved {i}", flush=True)


if __name__ == "__main__":
    main()
