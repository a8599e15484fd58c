"""Appends large messages to a new session for ever, printing the count after each append.

Run as a script by the kill test: whatever count it printed last must be on disk after SIGKILL.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import SessionStore


async def main(folder: Path) -> None:
    session = SessionStore(folder / "sessions").create(cwd=str(folder), model_id="offline/default")
    i = 0
    while True:
        content = f"m{i:06d} " + "y" * (5000 + (i * 7919) % 200_000)
        await session.append(TranscriptMessage(role="user", content=content))
        i += 1
        print(i, flush=True)


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]))
