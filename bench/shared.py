"""Shared project memory (issue 27) against a disk root: a save, a teammate finding it, a search.

Run: .venv/bin/python bench/shared.py [--notes 10000] [--writes 200] [--finds 20] [--json]
Starts its own PostgreSQL server from the machine's binaries (tests/pgserver.py, on a unix
socket, syncing to disk as a team's server does), then measures, each beside its reference:
- a save: the median time of --writes `write`s of project notes (cycling over 50 paths, so most
  are updates) through a store whose project root is shared, against the same writes to a
  project root on disk (its journal in SQLite), alternated in rounds;
- a teammate finding it: a real `acp-memory http` process (another home, the same project
  key) searched over HTTP, from the moment one save returned until that search first finds
  it, --finds times (the goal: within 1 s);
- a warm search on --notes notes (bench/search_corpus.py) in the shared root against the same
  notes in a project root on disk, each index built first (the goal: within 1.5x); the notes
  are loaded into the server's table at once, and the copy's first sync of them is timed too.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from search_corpus import HITS, build_corpus, p95, timed

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import pgserver  # noqa: E402

from acp_memory.config import Config, resolve_paths  # noqa: E402
from acp_memory.config.models import MemoryConfig, SharedMemoryConfig  # noqa: E402
from acp_memory.memory.shared.schema import SCHEMA, ensure_schema  # noqa: E402
from acp_memory.memory.store import MemoryStore  # noqa: E402

KEY = "github.com/bench/shared"
SAVE_PATHS = 50
FIND_BOUND_S = 10.0


def shared_config(dsn: str) -> Config:
    return Config(memory=MemoryConfig(shared=SharedMemoryConfig(dsn=dsn, project=KEY)))


def store_in(base: Path, cfg: Config) -> MemoryStore:
    """The store `notes` would open for the home base/home in the folder base/cwd."""
    (base / "cwd").mkdir(parents=True, exist_ok=True)
    paths = resolve_paths(home=str(base / "home"), cwd=str(base / "cwd"))
    return MemoryStore.from_config(cfg, paths)


def saves(store: MemoryStore, writes: int, offset: int) -> float:
    """ms per write of `writes` saves to project notes."""
    started = time.perf_counter()
    for i in range(writes):
        store.write(f"project:saves/n{i % SAVE_PATHS}.md",
                    f"fact {offset + i}: the team deploys on Fridays\n" * 20)
    return (time.perf_counter() - started) / writes * 1000


def measure_saves(base: Path, dsn: str, writes: int, rounds: int = 3) -> dict[str, float]:
    disk_store = store_in(base / "disk-saves", Config())
    shared_store = store_in(base / "shared-saves", shared_config(dsn))
    disk: list[float] = []
    shared: list[float] = []
    with disk_store, shared_store:
        saves(disk_store, SAVE_PATHS, 0)  # the paths exist: what follows are updates, as
        saves(shared_store, SAVE_PATHS, 0)  # most saves are
        for r in range(rounds):  # alternated: a slow spell of the machine hits both
            disk.append(saves(disk_store, writes, (r + 1) * writes))
            shared.append(saves(shared_store, writes, (r + 1) * writes))
    return {"disk_save_ms": statistics.median(disk), "shared_save_ms": statistics.median(shared)}


@contextlib.contextmanager
def http_teammate(base: Path, dsn: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`acp-memory http` in a home of its own on the same key; (its URL, the process)."""
    home, cwd = base / "teammate" / "home", base / "teammate" / "cwd"
    home.mkdir(parents=True)
    cwd.mkdir(parents=True)
    # Memory on, as a team's agents run: a session's shared root is then kept caught up by
    # the server's notifications (with memory off, its reads catch up once a second).
    (home / "config.yaml").write_text(
        f"memory:\n  enable: true\n  shared:\n    dsn: {json.dumps(dsn)}\n"
        f"    project: {json.dumps(KEY)}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_memory", "http", "--home", str(home), "--cwd", str(cwd),
         "--port", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    assert proc.stderr is not None
    said = io.BytesIO()
    url = ""
    for line in proc.stderr:  # its log, until it says where it listens
        said.write(line)
        if found := re.search(rb"listening on (http://\S+)", line):
            url = found.group(1).decode()
            break
    if not url:
        proc.kill()
        raise SystemExit(f"the teammate's http server did not start: {said.getvalue()[-500:]!r}")
    # Read the rest of its log as it comes: a full pipe would block it.
    drain = threading.Thread(target=lambda: [None for _ in proc.stderr or ()], daemon=True)
    drain.start()
    try:
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def measure_finds(base: Path, dsn: str, finds: int) -> dict[str, Any]:
    """ms from a save returning to the teammate's HTTP search finding it, --finds times."""
    import httpx

    store = store_in(base / "finder", shared_config(dsn))
    took: list[float] = []
    with store, http_teammate(base, dsn) as (url, _), httpx.Client(base_url=url,
                                                                    timeout=30) as client:
        sid = client.post("/coddy/sessions", json={"cwd": str(base / "teammate" / "cwd")}
                          ).json()["id"]
        search = f"/coddy/sessions/{sid}/memory/search"
        client.get(search, params={"q": "warm", "root": "workspace"})  # its copy, its index
        for i in range(finds):
            word = f"quokka{i:04d}"
            store.write(f"project:found/n{i}.md", f"The team's {word} note.\n")
            started = time.perf_counter()
            while True:
                hits = client.get(search, params={"q": word, "root": "workspace"}).json()
                if hits.get("hits"):
                    break
                if time.perf_counter() - started > FIND_BOUND_S:
                    raise SystemExit(f"the teammate never found {word} ({FIND_BOUND_S:g} s)")
                time.sleep(0.005)  # a client polling: not a tight loop on the server
            took.append((time.perf_counter() - started) * 1000)
    return {"find_ms": statistics.median(took), "find_max_ms": max(took), "finds": finds}


def load_rows(dsn: str, folder: Path) -> int:
    """Every note under folder as a row of the key, with a row per folder, in one COPY: the
    bench times the searches, not an import (`notes import` journals each note)."""
    files = sorted(p for p in folder.rglob("*.md"))
    folders = sorted({p.parent.relative_to(folder).as_posix() for p in files} - {"."})
    with psycopg.connect(dsn) as conn:
        ensure_schema(conn)
        with conn.cursor().copy(f"COPY {SCHEMA}.notes (project, path, body, sha256, updated_at, "
                                "updated_by) FROM STDIN") as copy:
            for rel in folders:
                copy.write_row((KEY, rel, None, None, "now", "bench"))
            for path in files:
                body = path.read_text(encoding="utf-8")
                copy.write_row((KEY, path.relative_to(folder).as_posix(), body,
                                hashlib.sha256(body.encode()).hexdigest(), "now", "bench"))
    return len(files)


def measure_search(base: Path, dsn: str, notes: int) -> dict[str, Any]:
    """A warm search of the corpus in a disk project root and in the shared one."""
    disk_base = base / "disk-search"
    corpus = build_corpus(disk_base / "cwd" / "memory", notes)
    load_rows(dsn, corpus.root)
    disk_store = store_in(disk_base, Config())
    shared_store = store_in(base / "shared-search", shared_config(dsn))
    out: dict[str, Any] = {"notes": notes}
    with disk_store, shared_store:
        shared_root = shared_store.roots.project_root
        assert shared_root is not None
        out["first_sync_ms"] = timed(lambda: shared_store.refresh(("project",)))
        synced = sum(1 for _ in shared_root.rglob("*.md"))
        if synced != notes:
            raise SystemExit(f"the local copy holds {synced} of the {notes} notes")
        for store in (disk_store, shared_store):
            root = store.roots.project_root
            assert root is not None
            store.indexes.build(root)
            for q in corpus.queries[:20]:  # warm: the index open, its pages read
                store.search(q, "project", HITS)
        disk: list[float] = []
        shared: list[float] = []
        for _ in range(3):  # alternated
            disk += [timed(partial(disk_store.search, q, "project", HITS))
                     for q in corpus.queries]
            shared += [timed(partial(shared_store.search, q, "project", HITS))
                       for q in corpus.queries]
    out["disk_search_ms"], out["disk_search_p95_ms"] = statistics.median(disk), p95(disk)
    out["shared_search_ms"], out["shared_search_p95_ms"] = statistics.median(shared), p95(shared)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--finds", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--dsn", default="", help="a running server to make the bench's "
                        "databases on (as a user who may create one), instead of a server of "
                        "its own started from the machine's binaries")
    args = parser.parse_args()
    server = None
    if not args.dsn:
        if (why := pgserver.unavailable()) is not None:
            raise SystemExit(why)
        server = pgserver.start_server(durable=True)
    admin = args.dsn or (server.dsn if server else "")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            f = measure_saves(base, pgserver.new_database(admin), args.writes)
            f |= measure_finds(base, pgserver.new_database(admin), args.finds)
            f |= measure_search(base, pgserver.new_database(admin), args.notes)
    finally:
        if server is not None:
            pgserver.remove(server)
    f["dir"] = tempfile.gettempdir()
    print(f"a save, {args.writes} writes x 3 rounds over {SAVE_PATHS} notes")
    print(f"  disk root      {f['disk_save_ms']:8.2f} ms/write")
    print(f"  shared root    {f['shared_save_ms']:8.2f} ms/write   "
          f"ratio {f['shared_save_ms'] / f['disk_save_ms']:.2f}x")
    print(f"a teammate's HTTP search finding a save, {f['finds']} saves")
    print(f"  median         {f['find_ms']:8.1f} ms   max {f['find_max_ms']:.1f} ms")
    print(f"a warm search, {f['notes']:,} notes ({HITS} hits)")
    print(f"  first sync     {f['first_sync_ms']:8.0f} ms (the local copy made from the server)")
    print(f"  disk root      {f['disk_search_ms']:8.2f} ms median   "
          f"p95 {f['disk_search_p95_ms']:.2f} ms")
    print(f"  shared root    {f['shared_search_ms']:8.2f} ms median   "
          f"p95 {f['shared_search_p95_ms']:.2f} ms   "
          f"ratio {f['shared_search_ms'] / f['disk_search_ms']:.2f}x")
    if args.json:
        print(json.dumps(f))


if __name__ == "__main__":
    main()
