"""One writing process per bundle: an advisory lock held from the first write until close."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"


class BundleBusy(Exception):
    """Another process is writing this bundle."""


class BundleLock:
    """flock on `<bundle>/.lock`: released on close, or by the kernel when the process ends."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock without waiting; BundleBusy when another process holds it."""
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise BundleBusy(
                f"{self.path.parent} is being written by another acp-memory process; "
                "close the session there first"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
