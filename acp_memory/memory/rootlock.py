"""The lock of a note root: an exclusive flock on the root folder itself, which holds across
threads and processes alike, needs no write access and puts no file in the folder people
commit. Every write of a root, and the catch-up of a shared root's local copy, holds it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path


class RootBusy(Exception):
    """Another process held the root's lock past the timeout; the message says so in a line."""


@contextlib.contextmanager
def root_lock(root: Path, scope: str, timeout: float) -> Iterator[int]:
    """Hold root's lock (the root made first when missing), yielding the folder's descriptor;
    RootBusy past `timeout` seconds, OSError when the folder cannot be made or opened."""
    # A root not made yet is made first (the write would make it anyway), so that the lock is
    # always the root's own: its parent may be a home or a workspace.
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _acquire(fd, scope, timeout)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def _acquire(fd: int, scope: str, timeout: float) -> None:
    # Polled rather than blocking: a process that holds the lock forever (stopped in a
    # debugger, say) must cost a clear error, not a hung tool.
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise RootBusy(
                    f"the {scope} root is locked by another process; nothing was written, "
                    "try again"
                ) from None
            time.sleep(0.005)
