"""Reads a messages.json over and over until told to stop, as another process would.

Exits 1 with the problem on stdout the first time the file is not a whole transcript, or holds
fewer messages than an earlier read did; else prints how many reads it made.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(path: Path, stop: Path) -> int:
    reads = seen = 0
    while not stop.exists():
        try:
            count = len(json.loads(path.read_bytes())["messages"])
        except (OSError, ValueError) as exc:
            print(f"unreadable after {reads} reads: {exc!r}", flush=True)
            return 1
        if count < seen:
            print(f"{count} messages after {seen} were seen", flush=True)
            return 1
        reads, seen = reads + 1, count
    print(f"ok {reads}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
