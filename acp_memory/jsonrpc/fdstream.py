"""anyio byte streams over raw file descriptors (the process's stdin and stdout)."""

from __future__ import annotations

import contextlib
import os
import stat

import anyio
from anyio import BrokenResourceError, ClosedResourceError, EndOfStream
from anyio.abc import ByteReceiveStream, ByteSendStream


def _pollable(fd: int) -> bool:
    # epoll refuses regular files; reads from them never block, so plain reads are right there.
    return not stat.S_ISREG(os.fstat(fd).st_mode)


class _Fd:
    """A non-blocking fd whose original blocking mode is restored on close."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._was_blocking = os.get_blocking(fd)
        if _pollable(fd):
            os.set_blocking(fd, False)
        self._closed = False

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            # O_NONBLOCK belongs to the open file, which the parent process may share.
            with contextlib.suppress(OSError):
                os.set_blocking(self._fd, self._was_blocking)


class FdReceiveStream(_Fd, ByteReceiveStream):
    """Reads a pipe, socket, tty or file without blocking the event loop."""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._closed:
                raise ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            except OSError as exc:
                raise BrokenResourceError from exc
            if not data:
                raise EndOfStream
            return data


class FdSendStream(_Fd, ByteSendStream):
    """Writes to a pipe, socket, tty or file without blocking the event loop."""

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            if self._closed:
                raise ClosedResourceError
            try:
                written = os.write(self._fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            except OSError as exc:
                raise BrokenResourceError from exc
            view = view[written:]
