"""One performance report: issue 26's figures from the benches, as one Markdown table.

Run from the repo root: .venv/bin/python bench/report.py [--full] [--no-suite]

Each bench runs as a subprocess with `--json`, one after another (two at once would share the
cores and skew both), at a size that keeps the default run within about 5 minutes on 2 cores;
its figures come from its JSON last line, each measured beside its reference in that same run.
`--full` adds the 100,000-note rows (bench/search.py at 100,000 notes, which also builds 10,000
for the ratio of the builds; long). `--no-suite` leaves out the timed test suite. A bench that
fails gets "failed: <its last line>" in its rows and the report goes on. Progress goes to
stderr; stdout holds the header and the table only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"

# Each bench and the arguments of this report's run of it (small sizes: see the docstring).
BENCHES: dict[str, list[str]] = {
    "wire": ["wire.py", "--runs", "10", "--chunks", "200"],
    "memory_run": ["memory_run.py", "--turns", "200", "--rss-turns", "0"],
    "http_api": ["http_api.py", "--requests", "200", "--chats", "200", "--flat", "0"],
    "search": ["search.py", "--notes", "10000"],
    "journal": ["journal.py", "--writes", "300", "--rounds", "3"],
    "shared": ["shared.py", "--notes", "10000", "--writes", "200", "--finds", "20"],
    "proxy": ["proxy.py", "--updates", "20000", "--runs", "5", "--pings", "500", "--prompts", "50"],
    "tidy": ["tidy.py", "--notes", "10000", "--duplicates", "500", "--contradictions", "200"],
}
FULL: dict[str, list[str]] = {"search_full": ["search.py", "--notes", "100000"]}
SUITE = [sys.executable, "-m", "pytest"]  # the README's test command
TIMEOUT_S = {"search_full": 3600.0, "suite": 600.0}  # the suite: 5x its goal
DEFAULT_TIMEOUT_S = 600.0
MEMORY_CHATS = "POST /v1/chat/completions (offline, memory on)"  # bench/http_api.py's rows
PLAIN_CHATS = "POST /v1/chat/completions (offline, memory off)"

Figures = dict[str, Any]


@dataclass
class Row:
    figure: str
    ours: str = ""
    reference: str = ""
    ratio: str = ""
    goal: str = ""
    met: str = ""


def yes(ok: bool) -> str:
    return "yes" if ok else "no"


def ms(value: float) -> str:
    return f"{value:.2f} ms" if value < 10 else f"{value:,.0f} ms"


def times(value: float) -> str:
    return f"{value:.2f}×"


# Each makes a figure's row from its bench's figures (a missing key fails that row only).
def cold_start(figure: str, f: Figures) -> Row:
    ratio = f["cold_ms"] / f["echo_cold_ms"]
    return Row(figure, ms(f["cold_ms"]), f"SDK echo agent {ms(f['echo_cold_ms'])}",
               times(ratio), "≤ 0.7×", yes(ratio <= 0.7))


def memory_added(figure: str, f: Figures) -> Row:
    return Row(figure, f"+{f['added_p50_ms']:.2f} ms", f"memory off {ms(f['off_p50_ms'])}",
               times(f["on_less_child_p50_ms"] / f["off_p50_ms"]), "≤ +2.5 ms p50",
               yes(f["added_p50_ms"] <= 2.5))


def memory_trips(figure: str, f: Figures) -> Row:
    on, off = f["hops_on"], f["hops_off"]
    return Row(figure, f"{on:g}", f"memory off {off:g}", f"+{on - off:g}", "≤ 4", yes(on <= 4))


def http_memory(figure: str, f: Figures) -> Row:
    on, off = f["rps"][MEMORY_CHATS]["16"], f["rps"][PLAIN_CHATS]["16"]
    return Row(figure, f"{on:.1f}/s", f"memory off {off:.1f}/s", times(on / off), "≥ 0.5×",
               yes(on / off >= 0.5))


def index_size(figure: str, f: Figures) -> Row:
    ratio = f["index_mb"] / f["notes_mb"]
    return Row(figure, f"{f['index_mb']:.1f} MB", f"notes {f['notes_mb']:.1f} MB", times(ratio),
               "≤ 1.3×", yes(ratio <= 1.3))


def index_build(figure: str, f: Figures) -> Row:
    if f["rg_ms"] is None:
        return Row(figure, met="failed: no baseline, ripgrep (rg) is not installed")
    ratio = f["build_ms"] / f["rg_ms"]
    return Row(figure, f"{f['build_ms'] / 1000:.2f} s", f"`rg -i -F` {ms(f['rg_ms'])}",
               f"{ratio:.0f}×", "≤ 40×", yes(ratio <= 40))


def big_build(figure: str, f: Figures) -> Row:
    ratio = f["build_ms"] / f["small_build_ms"]
    return Row(figure, f"{f['build_ms'] / 1000:.1f} s",
               f"10,000-note build {f['small_build_ms'] / 1000:.2f} s", times(ratio),
               "≤ 11× the 10,000-note build", yes(ratio <= 11))


def scan_within(bound_s: float) -> Callable[[str, Figures], Row]:
    def scan(figure: str, f: Figures) -> Row:
        if math.isnan(f["scan_ms"]):  # the build was done before a scan finished
            return Row(figure, met="failed: no search finished while the index was building")
        return Row(figure, ms(f["scan_ms"]), f"indexed {ms(f['warm_ms'])}",
                   f"{f['scan_ms'] / f['warm_ms']:,.0f}×", f"≤ {bound_s:g} s",
                   yes(f["scan_ms"] <= bound_s * 1000))

    return scan


def journal(figure: str, f: Figures) -> Row:
    fs = filesystem(f["dir"])
    ratio = f["journaled_ms"] / f["plain_ms"]
    met = yes(ratio <= 1.3) if not fs.startswith("tmpfs") else "no: tmpfs is not a real disk"
    return Row(f"{figure} ({f['dir']}: {fs})", f"{ms(f['journaled_ms'])}/write",
               f"plain atomic write {ms(f['plain_ms'])}", times(ratio), "≤ 1.3×", met)


def shared_save(figure: str, f: Figures) -> Row:
    ratio = f["shared_save_ms"] / f["disk_save_ms"]
    return Row(figure, f"{ms(f['shared_save_ms'])}/write",
               f"disk root {ms(f['disk_save_ms'])}", times(ratio), "—", "—")


def shared_find(figure: str, f: Figures) -> Row:
    return Row(figure, f"{ms(f['find_ms'])} median, {ms(f['find_max_ms'])} max", "—", "—",
               "≤ 1 s", yes(f["find_max_ms"] <= 1000))


def shared_search(figure: str, f: Figures) -> Row:
    ratio = f["shared_search_ms"] / f["disk_search_ms"]
    return Row(figure, ms(f["shared_search_ms"]), f"disk root {ms(f['disk_search_ms'])}",
               times(ratio), "≤ 1.5×", yes(ratio <= 1.5))


def proxy_stream(figure: str, f: Figures) -> Row:
    ratio = f["sdk_proxy_rate"] / f["sdk_direct_rate"]
    return Row(figure, f"{f['sdk_proxy_rate']:,.0f}/s",
               f"same agent direct {f['sdk_direct_rate']:,.0f}/s", times(ratio), "≥ 0.8×",
               yes(ratio >= 0.8))


def proxy_ceiling(figure: str, f: Figures) -> Row:
    return Row(figure, f"{f['raw_proxy_rate']:,.0f}/s",
               f"same agent direct {f['raw_direct_rate']:,.0f}/s",
               times(f["raw_proxy_rate"] / f["raw_direct_rate"]), "—", "—")


def proxy_added(figure: str, f: Figures) -> Row:
    return Row(figure, f"+{f['added_p50_ms']:.3f} ms (p95 +{f['added_p95_ms']:.3f} ms)",
               f"direct {f['direct_p50_ms']:.3f} ms", times(f["proxy_p50_ms"] / f["direct_p50_ms"]),
               "≤ 1 ms p50", yes(f["added_p50_ms"] <= 1))


def proxy_prompt(figure: str, f: Figures) -> Row:
    return Row(figure, ms(f["prompt_on_p50_ms"]),
               f"memory off {ms(f['prompt_off_p50_ms'])}, direct {ms(f['prompt_direct_p50_ms'])}",
               times(f["prompt_on_p50_ms"] / f["prompt_off_p50_ms"]), "—", "—")


def tidy_found(figure: str, f: Figures) -> Row:
    return Row(figure, f"{f['found']:.3f} in {f['candidates_s']:.2f} s",
               f"{f['duplicates'] + f['contradictions']} planted pairs, {f['groups']} groups",
               "—", "≥ 0.95 within 10 s", yes(f["found"] >= 0.95 and f["candidates_s"] <= 10))


def tidy_precision(figure: str, f: Figures) -> Row:
    if f["offline_tidy_precision"] is None:
        return Row(figure, met="failed: the offline tidy proposed nothing")
    return Row(figure, f"{f['offline_tidy_precision']:.3f}",
               f"{f['tidy_proposals']} proposals over {f['tidy_groups']} groups in "
               f"{f['tidy_s']:.1f} s", "—", "≥ 0.9", yes(f["offline_tidy_precision"] >= 0.9))


def suite(figure: str, f: Figures) -> Row:
    return Row(figure, f"{f['seconds']:.0f} s", "—", "—", "≤ 120 s", yes(f["seconds"] <= 120))


# The table's rows: the figure, the bench (or "suite") its figures come from, and how.
ROWS: list[tuple[str, str, Callable[[str, Figures], Row]]] = [
    ("cold start: spawn to the `initialize` answer", "wire", cold_start),
    ("what memory adds to a turn, p50 (instant model, memory on vs off)", "memory_run",
     memory_added),
    ("worker-thread trips before the turn's model request, memory on", "memory_run",
     memory_trips),
    ("HTTP `/v1/chat/completions`, 16 clients, memory on, requests/s", "http_api", http_memory),
    ("index size, 10,000 notes, embeddings off", "search", index_size),
    ("index size, 100,000 notes, embeddings off", "search_full", index_size),
    ("index build, 10,000 notes", "search", index_build),
    ("index build, 100,000 notes", "search_full", big_build),
    ("a search while the index builds (direct scan), 10,000 notes", "search", scan_within(0.3)),
    ("a search while the index builds (direct scan), 100,000 notes", "search_full",
     scan_within(3)),
    ("a journaled note write", "journal", journal),
    ("a shared project note write (PostgreSQL)", "shared", shared_save),
    ("a teammate's search finding a shared save", "shared", shared_find),
    ("a warm search, 10,000 shared notes", "shared", shared_search),
    ("`session/update` streaming through `acp-memory proxy`, an SDK agent, updates/s", "proxy",
     proxy_stream),
    ("the same, a raw JSON-RPC agent (the relay's ceiling), updates/s", "proxy", proxy_ceiling),
    ("what `acp-memory proxy` adds to a forwarded message, one way, p50", "proxy", proxy_added),
    ("a prompt's round trip through `acp-memory proxy`, memory on (offline model), p50", "proxy",
     proxy_prompt),
    ("tidy's candidates, 10,000 notes: the planted duplicates and contradictions found",
     "tidy", tidy_found),
    ("the offline tidy's precision: its proposals that act on a planted pair as planted",
     "tidy", tidy_precision),
    ("the test suite, `python -m pytest` (3 workers)", "suite", suite),
]  # fmt: skip


def rows(results: dict[str, Figures | str]) -> list[Row]:
    """The table's rows for the benches in `results`: each one's figures, or the one line
    saying why it failed. Rows of a bench not in `results` (not run) are left out."""
    out = []
    for figure, bench, make in ROWS:
        if bench not in results:
            continue
        result = results[bench]
        if isinstance(result, str):
            out.append(Row(figure, met=f"failed: {result}"))
            continue
        try:
            out.append(make(figure, result))
        except (KeyError, TypeError, ZeroDivisionError) as e:  # a bench that changed its output
            out.append(Row(figure, met=f"failed: no usable figure ({type(e).__name__}: {e})"))
    return out


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    lines = ["| figure | ours | reference | ratio | goal | met |", "|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r.figure, r.ours, r.reference, r.ratio, r.goal, r.met]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def last_line(text: str) -> str:
    """The last non-blank line of text, cut short: a failure in one table cell."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


def run(argv: list[str], timeout: float) -> tuple[int | None, str, str]:
    """argv in its own process group, so that a bench timed out goes with the servers it
    started; its exit code (None if it timed out), stdout and stderr."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, err
    return proc.returncode, out, err


def run_bench(argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> Figures | str:
    """A bench's figures from the JSON last line of its output, or one line saying why not."""
    code, out, err = run(argv, timeout)
    if code is None:
        return f"timed out after {timeout:.0f} s"
    if code != 0:
        return last_line(err or out)
    try:
        figures = json.loads(out.splitlines()[-1])
    except (IndexError, ValueError):
        return f"no JSON last line: {last_line(out)}"
    if not isinstance(figures, dict):
        return f"no JSON object last: {last_line(out)}"
    return figures


def run_suite(timeout: float) -> Figures | str:
    """The test suite's seconds, or its summary line if it failed."""
    started = time.perf_counter()
    code, out, err = run(SUITE, timeout)
    if code is None:
        return f"timed out after {timeout:.0f} s"
    if code != 0:
        return last_line(out or err)  # pytest's summary: "2 failed, 990 passed in 118.20s"
    return {"seconds": time.perf_counter() - started}


def filesystem(path: str) -> str:
    """The filesystem type and device holding path, from /proc/mounts ("ext4 /dev/vda")."""
    found = ("unknown filesystem", "", -1)
    with contextlib.suppress(OSError):
        target = os.path.realpath(path)
        for line in Path("/proc/mounts").read_text().splitlines():
            device, mount, kind = line.split()[:3]
            inside = target == mount or target.startswith(mount.rstrip("/") + "/")
            if inside and len(mount) >= found[2]:  # the last and deepest mount holding it wins
                found = (kind, device, len(mount))
    return f"{found[0]} {found[1]}".strip()


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def header(started: datetime, seconds: float, commands: list[str]) -> str:
    """The lines above the table: when, on what machine and disk, and what ran."""
    tmp = tempfile.gettempdir()
    return "\n\n".join([  # paragraphs, so that it reads as Markdown too
        f"acp-memory performance report, {started:%Y-%m-%d %H:%M} UTC, {seconds / 60:.1f} min "
        f"in all",
        f"machine: {os.cpu_count()} cores, {cpu_model()}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, benches' files in {tmp} ({filesystem(tmp)}), "
        f"load average {os.getloadavg()[0]:.1f} at the end",
        "ran: " + "; ".join(commands),
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="add the 100,000-note rows (long)")
    parser.add_argument("--no-suite", action="store_true", help="leave out the test suite")
    args = parser.parse_args()
    started, t0 = datetime.now(UTC), time.perf_counter()
    plan = {**BENCHES, **(FULL if args.full else {})}
    results: dict[str, Figures | str] = {}
    commands = []
    for name, (script, *sizes) in plan.items():
        argv = [sys.executable, str(BENCH / script), "--json", *sizes]
        commands.append(" ".join([f"bench/{script}", *sizes]))
        print(f"running {commands[-1]} ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        results[name] = run_bench(argv, TIMEOUT_S.get(name, DEFAULT_TIMEOUT_S))
        print(f"  {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    if not args.no_suite:
        commands.append("python -m pytest")
        print("running python -m pytest ...", file=sys.stderr, flush=True)
        results["suite"] = run_suite(TIMEOUT_S["suite"])
    print(header(started, time.perf_counter() - t0, commands))
    print()
    print(table(rows(results)))


if __name__ == "__main__":
    main()
