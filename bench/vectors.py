"""Brute-force cosine top-50 over note vectors: numpy, sqlite-vec and plain Python side by side.

Run: .venv/bin/python bench/vectors.py [--sizes 10000,100000] [--dim 384] [--extra 100000x768]
     [--queries 50] [--python-queries 10] [--impls numpy,numpy-f16,...] [--blas-threads 1]
Needs numpy, and for the sqlite-vec rows also sqlite-vec and apsw (this Python's sqlite3 cannot
load extensions): `.venv/bin/pip install numpy sqlite-vec apsw`. Vectors are random Gaussian
rows (fixed seed, L2-normalised), written once to a temporary file; every implementation runs in a
fresh subprocess (`--impl X --n N --dim D --dir DIR`) so its RSS figure is its own. Prints median
and p95 query time, build/load time, on-disk size and RSS increase, with ratios against numpy
(float32) in the same run, and checks that every implementation finds the same top 50.
"""

from __future__ import annotations

import argparse
import heapq
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from operator import mul
from pathlib import Path
from typing import Any

K = 50
SEED = 19
SANITY = 3  # the first queries whose top-50 ids every implementation reports
F16_CHUNK = 2048  # rows cast to float32 at a time: 3 MiB stays in cache (2048 beat 512..16384)

IMPLS = ["numpy", "numpy-f16", "sqlite-blob", "vec0", "vec0-l2", "vec-scan", "python"]
VEC = ["apsw", "sqlite_vec"]
NEEDS = {
    "numpy": ["numpy"], "numpy-f16": ["numpy"], "sqlite-blob": ["numpy"],
    "vec0": VEC, "vec0-l2": VEC, "vec-scan": VEC, "python": [],
}
WHAT = {
    "numpy": "float32 matrix @ q, argpartition",
    "numpy-f16": "float16 matrix, chunks cast to f32",
    "sqlite-blob": "stdlib sqlite3 BLOB table -> numpy",
    "vec0": "sqlite-vec vec0 KNN, cosine (apsw)",
    "vec0-l2": "same, distance_metric=L2 (same order)",
    "vec-scan": "sqlite-vec vec_distance_cosine scan",
    "python": "array('f') rows, sum(map(mul)), heapq",
}

Query = Callable[[bytes], list[int]]


def status_kb(field: str) -> int:
    """One field of /proc/self/status (VmRSS, VmHWM) in kB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def missing(modules: list[str]) -> list[str]:
    """The modules of `modules` that cannot be imported here."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def read_rows(path: Path, dim: int) -> list[bytes]:
    """The float32 rows of a raw vector file, one bytes object each."""
    data = path.read_bytes()
    size = dim * 4
    return [data[i : i + size] for i in range(0, len(data), size)]


# Builders: each loads its structure (from the raw file, or the SQLite file its preparer wrote) and
# returns a query function taking a float32 query blob and returning the top-K ids, best first.


def build_numpy(data: Path, dim: int, work: Path) -> Query:
    import numpy as np

    matrix = np.fromfile(data, dtype=np.float32).reshape(-1, dim)
    return numpy_query(matrix)


def numpy_query(matrix: Any) -> Query:
    import numpy as np

    n = matrix.shape[0]

    def query(blob: bytes) -> list[int]:
        scores = matrix @ np.frombuffer(blob, dtype=np.float32)
        top = np.argpartition(scores, n - K)[n - K :]
        return [int(i) for i in top[np.argsort(-scores[top])]]

    return query


def build_numpy_f16(data: Path, dim: int, work: Path) -> Query:
    import numpy as np

    n = data.stat().st_size // (dim * 4)
    matrix = np.empty((n, dim), dtype=np.float16)
    with data.open("rb") as f:  # chunked, so no float32 copy of the whole matrix ever exists
        for start in range(0, n, F16_CHUNK):
            rows = min(F16_CHUNK, n - start)
            chunk = np.frombuffer(f.read(rows * dim * 4), np.float32)
            matrix[start : start + rows] = chunk.reshape(rows, dim)
    buf = np.empty((F16_CHUNK, dim), dtype=np.float32)
    scores = np.empty(n, dtype=np.float32)

    def query(blob: bytes) -> list[int]:
        q = np.frombuffer(blob, dtype=np.float32)
        for start in range(0, n, F16_CHUNK):
            rows = min(F16_CHUNK, n - start)
            np.copyto(buf[:rows], matrix[start : start + rows])
            np.dot(buf[:rows], q, out=scores[start : start + rows])
        top = np.argpartition(scores, n - K)[n - K :]
        return [int(i) for i in top[np.argsort(-scores[top])]]

    return query


def write_blob_table(conn: Any, data: Path, dim: int) -> None:
    """The vectors as float32 BLOBs in an ordinary table, the way the index would keep them."""
    conn.execute("CREATE TABLE vec (id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
    conn.executemany("INSERT INTO vec VALUES (?, ?)", enumerate(read_rows(data, dim)))


def prepare_sqlite_blob(data: Path, dim: int, db: Path) -> None:
    import sqlite3

    with sqlite3.connect(db) as conn:
        write_blob_table(conn, data, dim)
    conn.close()


def build_sqlite_blob(data: Path, dim: int, work: Path) -> Query:
    import sqlite3

    import numpy as np

    # What opening the index costs: every row read back into one matrix (plus its ids).
    conn = sqlite3.connect(work / "sqlite-blob.sqlite")
    (n,) = conn.execute("SELECT count(*) FROM vec").fetchone()
    size = dim * 4
    buf = bytearray(n * size)
    view = memoryview(buf)
    ids = array("q", bytes(8 * n))
    for i, (rowid, blob) in enumerate(conn.execute("SELECT id, embedding FROM vec")):
        view[i * size : (i + 1) * size] = blob
        ids[i] = rowid
    conn.close()
    matrix = np.frombuffer(buf, dtype=np.float32).reshape(n, dim)
    positions = numpy_query(matrix)
    return lambda blob: [ids[i] for i in positions(blob)]


def vec_connection(db: Path) -> Any:
    import apsw
    import sqlite_vec

    conn = apsw.Connection(str(db))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    return conn


def prepare_vec0(metric: str) -> Callable[[Path, int, Path], None]:
    def prepare(data: Path, dim: int, db: Path) -> None:
        conn = vec_connection(db)
        conn.execute(
            f"CREATE VIRTUAL TABLE vec USING vec0(embedding float[{dim}] distance_metric={metric})"
        )
        with conn:
            rows = enumerate(read_rows(data, dim))
            conn.executemany("INSERT INTO vec(rowid, embedding) VALUES (?, ?)", rows)
        conn.close()

    return prepare


def prepare_vec_scan(data: Path, dim: int, db: Path) -> None:
    conn = vec_connection(db)
    with conn:
        write_blob_table(conn, data, dim)
    conn.close()


def opener(impl: str, sql: str) -> Callable[[Path, int, Path], Query]:
    def build(data: Path, dim: int, work: Path) -> Query:
        conn = vec_connection(work / f"{impl}.sqlite")
        return lambda blob: [rowid for (rowid,) in conn.execute(sql, (blob, K))]

    return build


def build_python(data: Path, dim: int, work: Path) -> Query:
    rows = [array("f", row) for row in read_rows(data, dim)]

    def query(blob: bytes) -> list[int]:
        q = array("f", blob)  # an array, not a list: ~20% faster in map(mul) on 3.11
        scores = [sum(map(mul, q, row)) for row in rows]
        return heapq.nlargest(K, range(len(scores)), key=scores.__getitem__)

    return query


KNN = "SELECT rowid FROM vec WHERE embedding MATCH ? AND k = ? ORDER BY distance"
BUILDERS: dict[str, Callable[[Path, int, Path], Query]] = {
    "numpy": build_numpy, "numpy-f16": build_numpy_f16, "sqlite-blob": build_sqlite_blob,
    "vec0": opener("vec0", KNN), "vec0-l2": opener("vec0-l2", KNN),
    "vec-scan": opener(
        "vec-scan", "SELECT id FROM vec ORDER BY vec_distance_cosine(embedding, ?) LIMIT ?"
    ),
    "python": build_python,
}
# The SQLite-backed ones write their file in a process of their own first, so the measured process
# only opens it: its RSS is what serving costs, not what writing the file did.
PREPARERS: dict[str, Callable[[Path, int, Path], None]] = {
    "sqlite-blob": prepare_sqlite_blob, "vec0": prepare_vec0("cosine"),
    "vec0-l2": prepare_vec0("L2"), "vec-scan": prepare_vec_scan,
}


def child(impl: str, n: int, dim: int, work: Path, queries: int, build: bool) -> None:
    """Build or measure one implementation in this process; print its figures as one JSON line."""
    lacking = missing(NEEDS[impl])
    if lacking:
        print(f"vectors.py: {impl} needs {', '.join(lacking)} (pip install numpy sqlite-vec apsw)")
        sys.exit(2)
    for module in NEEDS[impl]:  # imported before the baseline so RSS counts data, not code
        __import__(module)
    data, qfile = work / f"data-{n}x{dim}.f32", work / f"queries-{dim}.f32"
    if build:
        db = work / f"{impl}.sqlite"
        db.unlink(missing_ok=True)
        started = time.perf_counter()
        PREPARERS[impl](data, dim, db)
        built = time.perf_counter() - started
        print(json.dumps({"build_s": built, "disk_bytes": db.stat().st_size}))
        return
    qblobs = read_rows(qfile, dim)[: max(queries, SANITY) + 1]  # the first is untimed
    info: dict[str, Any] = {"impl": impl}
    rss0, hwm0 = status_kb("VmRSS"), status_kb("VmHWM")
    started = time.perf_counter()
    query = BUILDERS[impl](data, dim, work)
    info["load_s"] = time.perf_counter() - started
    started = time.perf_counter()
    first = query(qblobs[0])
    info["first_ms"] = (time.perf_counter() - started) * 1000
    info["rss_mb"] = (status_kb("VmRSS") - rss0) / 1024
    info["hwm_mb"] = (status_kb("VmHWM") - hwm0) / 1024
    times, tops = [], [first]
    for blob in qblobs[1:]:
        started = time.perf_counter()
        top = query(blob)
        times.append((time.perf_counter() - started) * 1000)
        tops.append(top)
    times = times or [info["first_ms"]]
    info["queries"] = len(times)
    info["median_ms"] = statistics.median(times)
    info["p95_ms"] = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
    info["tops"] = tops[:SANITY]
    print(json.dumps(info))


def write_vectors(path: Path, n: int, dim: int, seed: int) -> None:
    """n random Gaussian float32 rows of `dim`, L2-normalised, written raw to `path`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    with path.open("wb") as f:
        for start in range(0, n, 10_000):  # in chunks so the parent stays small
            rows = rng.standard_normal((min(10_000, n - start), dim), dtype=np.float32)
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
            f.write(rows.tobytes())


def run(impl: str, n: int, dim: int, work: Path, queries: int, blas_threads: int
        ) -> dict[str, Any] | None:
    """One implementation measured in a fresh subprocess; None (last line shown) if it failed."""
    cmd = [sys.executable, __file__, "--impl", impl, "--n", str(n), "--dim", str(dim),
           "--dir", str(work), "--queries", str(queries)]
    # One BLAS thread: every implementation then uses one core, as a query inside the agent would
    # on this shared 2-core machine; --blas-threads lifts it.
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(blas_threads)}
    result: dict[str, Any] = {}
    for phase in [["--build"]] * (impl in PREPARERS) + [[]]:
        done = subprocess.run(cmd + phase, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            last = (done.stdout + done.stderr).strip().splitlines()[-1:]
            print(f"  {impl}{' build' if phase else ''}: failed (exit {done.returncode}):"
                  f" {' '.join(last)}")
            return None
        result |= json.loads(done.stdout.strip().splitlines()[-1])
    return result


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def report(n: int, dim: int, results: list[dict[str, Any]]) -> None:
    """The table for one size, with ratios against numpy float32 and the top-50 agreement."""
    base = next((r for r in results if r["impl"] == "numpy"), None)
    payload = n * dim * 4 / 2**20
    print(f"\n== {n:,} vectors x {dim} dims (float32 payload {payload:.1f} MiB), top {K} ==")
    head = (f"{'impl':<12}{'what':<38}{'q':>4}{'median ms':>11}{'p95 ms':>9}{'x numpy':>9}"
            f"{'first ms':>10}{'build s':>9}{'load s':>8}{'disk MiB':>10}{'RSS MiB':>9}"
            f"{'peak MiB':>10}  same top50")
    print(head)
    for r in results:
        ratio = r["median_ms"] / base["median_ms"] if base else None
        agree = "-"
        if base:
            overlap = [len(set(a) & set(b)) for a, b in zip(r["tops"], base["tops"], strict=True)]
            exact = all(a == b for a, b in zip(r["tops"], base["tops"], strict=True))
            if exact:
                agree = "same ids, same order"
            elif all(o == K for o in overlap):
                agree = "same ids, order differs"
            else:
                agree = "overlap " + "/".join(str(o) for o in overlap) + f" of {K}"
        disk = r.get("disk_bytes")
        print(f"{r['impl']:<12}{WHAT[r['impl']]:<38}{r['queries']:>4}{r['median_ms']:>11.2f}{r['p95_ms']:>9.2f}"
              f"{fmt(ratio, '.1f'):>9}{r['first_ms']:>10.1f}{fmt(r.get('build_s'), '.2f'):>9}"
              f"{fmt(r.get('load_s'), '.2f'):>8}{fmt(disk / 2**20 if disk else None, '.1f'):>10}"
              f"{r['rss_mb']:>9.1f}{r['hwm_mb']:>10.1f}  {agree}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="vector counts, comma separated")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--extra", default="100000x768",
                        help="further NxDIM runs, comma separated ('' for none)")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--python-queries", type=int, default=10,
                        help="queries for plain Python above 10k vectors")
    parser.add_argument("--impls", default=",".join(IMPLS))
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="OPENBLAS_NUM_THREADS for numpy")
    parser.add_argument("--impl", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.impl:
        child(args.impl, args.n, args.dim, args.dir, args.queries, args.build)
        return
    impls = [i for i in args.impls.split(",") if i]
    unknown = [i for i in impls if i not in IMPLS]
    if unknown:
        parser.error(f"unknown implementation {', '.join(unknown)} (known: {', '.join(IMPLS)})")
    lacking = missing(sorted({m for i in ["numpy", *impls] for m in NEEDS[i]}))
    if lacking:
        print(f"vectors.py: needs {', '.join(lacking)}: .venv/bin/pip install numpy sqlite-vec apsw"
              f" (or leave out those implementations with --impls)")
        sys.exit(2)
    shapes = [(int(n), args.dim) for n in args.sizes.split(",") if n]
    shapes += [(int(n), int(d)) for n, d in (s.split("x") for s in args.extra.split(",") if s)]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, OPENBLAS_NUM_THREADS="
          f"{args.blas_threads}; each implementation in a process of its own.\n"
          "build = writing the SQLite file (in a process of its own); load = from file to ready"
          " (numpy, python: a raw\nfloat32 file; sqlite-blob: the SQLite rows into one numpy"
          " matrix; vec*: opening the connection);\nRSS = VmRSS after the first query minus"
          " before loading; peak = VmHWM increase over the same span;\nq = timed queries, after"
          " one untimed first query.")
    with tempfile.TemporaryDirectory(prefix="vectors-bench-") as tmp:
        work = Path(tmp)
        for n, dim in shapes:
            write_vectors(work / f"data-{n}x{dim}.f32", n, dim, SEED)
            write_vectors(work / f"queries-{dim}.f32", max(args.queries, SANITY) + 1, dim, SEED + 1)
            results = []
            for impl in impls:
                queries = args.python_queries if impl == "python" and n > 10_000 else args.queries
                result = run(impl, n, dim, work, queries, args.blas_threads)
                if result:
                    results.append(result)
            report(n, dim, results)
            for f in work.iterdir():  # a 100k x 768 run leaves ~1 GiB of SQLite files otherwise
                f.unlink()


if __name__ == "__main__":
    main()
