"""Reads a messages.json over and over until told to stop, as another process would.

Exits 1 with the problem on stdout the first time the file is not a whole transcript whose
messages are the writer's first ones in order (m0, m1, ...); else prints how many reads it made.
A read may hold fewer messages than an earlier one (see acp_memory/sessions/transcript.py),
never a torn, reordered or invented one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(path: Path, stop: Path) -> int:
    reads = 0
    while not stop.exists():
        try:
            messages = json.loads(path.read_bytes())["messages"]
        except (OSError, ValueError) as exc:
            print(f"unreadable after {reads} reads: {exc!r}", flush=True)
            return 1
        firsts = [m["content"].split()[0] for m in messages]
        if firsts != [f"m{i}" for i in range(len(messages))]:
            print(f"not the writer's first {len(messages)} messages: {firsts}", flush=True)
            return 1
        reads += 1
    print(f"ok {reads}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
