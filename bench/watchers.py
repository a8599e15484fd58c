"""The index's change notification (inotify, read directly) against the watchfiles library.

Run: .venv/bin/python bench/watchers.py [--notes 10000]
Searches with and without a hand edit just before, whether the edit was seen, descriptors and
threads per root. Run it once more beside a few busy loops (`python -c 'while True: pass' &`) to
see what a loaded machine does to a watcher that runs on a thread of its own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from search_corpus import HITS, build_corpus, timed

from acp_memory.memory.index import sync as index_sync
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore
from acp_memory.memory.watch import Changes, Watcher


class WatchfilesWatcher:
    """The index's Watcher interface over watchfiles: one recursive watch of the whole root."""

    def __init__(self) -> None:
        self._notify: Any = None
        self._root = ""

    def add(self, folder: str, rel: str) -> None:
        from watchfiles._rust_notify import RustNotify

        if rel == "":
            self._root = folder
            self._notify = RustNotify([folder], False, False, 50, True, True)

    def drain(self) -> Changes:
        changes = Changes()
        # The shortest wait watchfiles offers: 0 would mean "until something changes".
        found = self._notify.watch(0, 0, 1, None)
        for _, path in found if isinstance(found, set) else ():
            rel = os.path.relpath(path, self._root)
            if rel.lower().endswith((".md", ".txt")):
                changes.files.add(rel)
            else:
                changes.rescan = True
        return changes

    def close(self) -> None:
        if self._notify is not None:
            self._notify.close()
            self._notify = None


def _count(folder: str) -> int:
    return len(os.listdir(folder))


def compare_watchers(work: Path, notes: int, edits: int = 50) -> None:
    corpus = build_corpus(work / "memory", notes)
    print(f"corpus: {notes} notes; {edits} hand edits, each followed at once by a search")
    for name, watcher in (("inotify", Watcher), ("watchfiles", WatchfilesWatcher)):
        index_sync.Watcher = watcher  # type: ignore[misc, assignment]
        fds, threads = _count("/proc/self/fd"), _count("/proc/self/task")
        with MemoryStore(Roots(work / "memory"), work / f"cache-{name}") as store:
            first = timed(lambda: store.search(corpus.queries[0], "global", HITS))
            extra_fds = _count("/proc/self/fd") - fds
            extra_threads = _count("/proc/self/task") - threads
            warm = [timed(partial(store.search, q, "global", HITS)) for q in corpus.queries[:100]]
            after, seen = [], 0
            target = work / "memory" / corpus.relevant[0]
            for i in range(edits):
                with open(target, "a", encoding="utf-8") as f:
                    f.write(f"\nzqmarker{i}\n")
                start = time.perf_counter()
                hits = store.search(f"zqmarker{i}", "global", HITS)
                after.append((time.perf_counter() - start) * 1000)
                seen += bool(hits)
        index_sync.Watcher = Watcher  # type: ignore[misc]
        print(f"{name:10}  first search {first:7.1f} ms, +{extra_fds} descriptors "
              f"+{extra_threads} threads for the root; warm median "
              f"{statistics.median(warm):.2f} ms; right after an edit median "
              f"{statistics.median(after):.2f} ms, edit seen {seen}/{edits}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--notes", type=int, default=10_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="acp-memory-watchers-"))
    try:
        compare_watchers(work, args.notes)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
