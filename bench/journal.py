"""What the memory history costs a write: note saves with and without the journal, alternated.

Run: .venv/bin/python bench/journal.py [--writes 300] [--rounds 3] [--notes 50] [--json]
Each round saves --writes notes (cycling over --notes paths, so most are updates) into a fresh
root, once through a store with no journal and once through one journaling every change (an
intent committed and synced before the rename, marked done after without a sync of its own).
Prints the median time per write of each and their ratio, plus the journal's size on disk.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from acp_memory.memory.history.journal import Journal
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore


def one_round(base: Path, writes: int, notes: int, journaled: bool) -> tuple[float, int]:
    journal = Journal(base / "history" / "journal.sqlite3") if journaled else None
    with MemoryStore(Roots(base / "memory"), base / "cache", journal=journal) as store:
        started = time.perf_counter()
        for i in range(writes):
            store.write(f"global:notes/n{i % notes}.md", f"fact {i}: the user prefers uv\n" * 20)
        took = (time.perf_counter() - started) / writes
    size = 0
    if journal is not None:
        journal.close()
        size = sum(p.stat().st_size for p in (base / "history").iterdir())
    return took, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--notes", type=int, default=50)
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args()
    plain: list[float] = []
    journaled: list[float] = []
    size = 0
    for _ in range(args.rounds):  # alternated, so that a slow spell of the machine hits both
        with tempfile.TemporaryDirectory() as tmp:
            plain.append(one_round(Path(tmp), args.writes, args.notes, False)[0])
        with tempfile.TemporaryDirectory() as tmp:
            took, size = one_round(Path(tmp), args.writes, args.notes, True)
            journaled.append(took)
    a, b = statistics.median(plain), statistics.median(journaled)
    print(f"{args.writes} writes x {args.rounds} rounds over {args.notes} notes")
    print(f"  without journal  {a * 1000:7.2f} ms/write")
    print(f"  with journal     {b * 1000:7.2f} ms/write   ratio {b / a:.2f}x, "
          f"+{(b - a) * 1000:.2f} ms")
    print(f"  journal on disk  {size / 1024:7.0f} KiB after {args.writes} writes")
    if args.json:
        print(json.dumps({"plain_ms": a * 1000, "journaled_ms": b * 1000,
                          "journal_kib": size / 1024, "dir": tempfile.gettempdir()}))


if __name__ == "__main__":
    main()
