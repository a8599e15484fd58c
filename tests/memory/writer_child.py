"""A child process for the concurrency and crash tests: saves notes and reports each one.

Usage: python writer_child.py ROOT CACHE WRITER_ID COUNT NAMES [increment]
Waits for a line on stdin before starting, prints "saved <i>" after each save.
With `increment`, each save adds one to a counter in note n<i % NAMES>: it reads the note and
writes it back only if no one changed it meanwhile (retrying when someone did).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore, NoteError


def body_for(writer: int, i: int) -> str:
    """A self-checking body: a header with the payload's length and hash, then the payload."""
    payload = (f"writer {writer} note {i} " * (1 + (i * 37) % 300)).strip()
    digest = hashlib.sha256(payload.encode()).hexdigest()
    return f"len={len(payload)} sha={digest}\n{payload}"


def is_whole(text: str) -> bool:
    header, _, payload = text.partition("\n")
    fields = dict(item.split("=", 1) for item in header.split())
    return (
        int(fields["len"]) == len(payload)
        and fields["sha"] == hashlib.sha256(payload.encode()).hexdigest()
    )


def increment(store: MemoryStore, path: str) -> None:
    """Add one to the counter in a note, never losing another writer's increment."""
    while True:
        try:
            current = store.read(path)[1]
        except NoteError:
            current = ""  # not written yet
        try:
            store.write(path, str(int(current or "0") + 1), if_unchanged=current)
            return
        except NoteError as exc:
            if "changed by someone else" not in str(exc):
                raise


def main() -> None:
    root, cache, writer, count, names = sys.argv[1:6]
    counting = sys.argv[6:] == ["increment"]
    store = MemoryStore(Roots(Path(root)), Path(cache))
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(int(count)):
        if counting:
            increment(store, f"global:shared/n{i % int(names)}.md")
        else:
            name = f"shared/n{i % int(names)}.md" if int(names) else f"shared/w{writer}-{i}.md"
            store.write(f"global:{name}", body_for(int(writer), i))
        print(f"saved {i}", flush=True)


if __name__ == "__main__":
    main()
