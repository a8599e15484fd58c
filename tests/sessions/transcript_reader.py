"""Loads a bundle over and over until told to stop, as another process would.

Exits 1 with the problem on stdout the first time the load fails or its transcript is not the
writer's first messages in order (m0, m1, ...); else prints how many loads it made. A load may
hold fewer messages than an earlier one (see acp_memory/sessions/transcript.py), never a torn,
reordered or invented one.
"""

from __future__ import annotations

import sys
from pathlib import Path

from acp_memory.sessions.store import BundleError, load_bundle


def main(bundle: Path, stop: Path) -> int:
    reads = 0
    while not stop.exists():
        try:
            messages = load_bundle(bundle).messages
        except BundleError as exc:
            print(f"unreadable after {reads} reads: {exc}", flush=True)
            return 1
        firsts = [str(m.content).split()[0] for m in messages]
        if firsts != [f"m{i}" for i in range(len(messages))]:
            print(f"not the writer's first {len(messages)} messages: {firsts}", flush=True)
            return 1
        reads += 1
    print(f"ok {reads}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
