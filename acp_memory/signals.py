"""SIGTERM and SIGINT as a graceful stop: the surface stops taking input, as at the end of
input, and running memory runs get their bounded wait (a persist cut mid-way loses its note).

A second signal during that wait acts as the signal's default does, so a stuck stop can
still be forced.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from signal import SIGINT, SIGTERM, Signals

import anyio

log = logging.getLogger(__name__)

STOP_SIGNALS = (SIGTERM, SIGINT)


async def until_signalled(work: Callable[[anyio.Event], Awaitable[None]]) -> Signals | None:
    """Run work(stop) until it returns; SIGTERM or SIGINT sets `stop`, on which work closes
    its front door and lets its background work finish within its bounds. The signal that
    stopped it, or None."""
    stop = anyio.Event()
    if threading.current_thread() is not threading.main_thread():
        await work(stop)  # only the main thread receives signals
        return None
    got: Signals | None = None
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            nonlocal got
            with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
                async for signum in signals:
                    got = Signals(signum)
                    log.debug("%s received: stopping", got.name)
                    stop.set()
                    return

        tg.start_soon(watch)
        await work(stop)
        tg.cancel_scope.cancel()
    return got


def exit_code(got: Signals | None) -> int:
    """The process's exit status after a graceful stop: 130 for Ctrl-C as shells report it,
    0 for SIGTERM (a requested stop) and for the end of input."""
    return 130 if got == SIGINT else 0


async def cancel_when_set(event: anyio.Event, scope: anyio.CancelScope) -> None:
    """Cancel `scope` once `event` is set (a stop signal ending a surface's front door)."""
    await event.wait()
    scope.cancel()
