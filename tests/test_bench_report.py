"""bench/report.py: its table from canned figures (no bench run), a failed bench's line, and
each bench's --json output the report reads."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_report", BENCH / "report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


report = load_report()

CANNED = {
    "wire": {"cold_ms": 300.0, "echo_cold_ms": 500.0},  # 0.6x: met
    "memory_run": {"off_p50_ms": 10.0, "on_less_child_p50_ms": 14.0, "added_p50_ms": 4.0,
                   "hops_on": 3, "hops_off": 2},  # +4 ms: missed; 3 trips: met
    "http_api": {"rps": {report.MEMORY_CHATS: {"16": 30.0}, report.PLAIN_CHATS: {"16": 100.0}}},
    "search": "the measuring child failed: database is locked",
    "journal": {"plain_ms": 10.0, "journaled_ms": 12.0, "dir": "/"},
    "suite": {"seconds": 130.0},
}  # fmt: skip


def cells(table: str, figure: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(f"| {figure}"))
    return [c.strip() for c in line.strip("|").split(" | ")]


def test_the_table_says_whether_each_goal_is_met_and_a_failed_bench_fails_only_its_rows(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(report, "filesystem", lambda path: "ext4 /dev/vda")
    table = report.table(report.rows(CANNED))
    assert table.splitlines()[0] == "| figure | ours | reference | ratio | goal | met |"
    assert cells(table, "cold start")[1:] == [
        "300 ms", "SDK echo agent 500 ms", "0.60×", "≤ 0.7×", "yes"]  # fmt: skip
    assert cells(table, "what memory adds")[-1] == "no"
    assert cells(table, "worker-thread trips")[-1] == "yes"
    assert cells(table, "HTTP")[3:] == ["0.30×", "≥ 0.5×", "no"]
    journal = cells(table, "a journaled note write (/: ext4 /dev/vda)")
    assert journal[3:] == ["1.20×", "≤ 1.3×", "yes"]
    assert cells(table, "the test suite")[-1] == "no"
    failed = "failed: the measuring child failed: database is locked"
    assert [cells(table, f)[-1] for f in ("index size, 10,000", "index build, 10,000",
                                          "a search while the index builds")] == [failed] * 3
    assert "100,000" not in table  # the --full rows only with their bench's figures


def test_the_full_rows_hold_the_100000_note_build_to_the_10000_note_build_of_its_run():
    big = {"notes": 100_000, "notes_mb": 418.0, "index_mb": 500.0, "build_ms": 60_000.0,
           "small_build_ms": 5_000.0, "rg_ms": 900.0, "scan_ms": 2_500.0, "warm_ms": 2.0}
    table = report.table(report.rows({"search_full": big}))
    assert cells(table, "index size, 100,000")[3:] == ["1.20×", "≤ 1.3×", "yes"]
    assert cells(table, "index build, 100,000")[2:] == [
        "10,000-note build 5.00 s", "12.00×", "≤ 11× the 10,000-note build", "no"]
    assert cells(table, "a search while the index builds (direct scan), 100,000")[-2:] == [
        "≤ 3 s", "yes"]  # fmt: skip


def test_a_search_bench_without_ripgrep_or_a_search_during_the_build_says_so():
    figures = {"rg_ms": None, "build_ms": 900.0, "scan_ms": float("nan"), "warm_ms": 1.0}
    made = {r.figure: r.met for r in report.rows({"search": figures})}
    assert made["index build, 10,000 notes"] == (
        "failed: no baseline, ripgrep (rg) is not installed")
    assert made["a search while the index builds (direct scan), 10,000 notes"] == (
        "failed: no search finished while the index was building")


def test_a_journal_on_tmpfs_does_not_meet_the_real_disk_goal(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(report, "filesystem", lambda path: "tmpfs tmpfs")
    (row,) = report.rows({"journal": {"plain_ms": 10.0, "journaled_ms": 11.0, "dir": "/tmp"}})
    assert row.met == "no: tmpfs is not a real disk"


def test_the_shared_rows_hold_the_shared_root_to_the_disk_root_and_a_find_to_one_second():
    shared = {"disk_save_ms": 2.0, "shared_save_ms": 5.0, "find_ms": 8.0, "find_max_ms": 1200.0,
              "disk_search_ms": 1.0, "shared_search_ms": 1.4}
    table = report.table(report.rows({"shared": shared}))
    assert cells(table, "a shared project note write")[1:] == [
        "5.00 ms/write", "disk root 2.00 ms", "2.50×", "—", "—"]  # fmt: skip
    assert cells(table, "a teammate's search finding")[1:] == [
        "8.00 ms median, 1,200 ms max", "—", "—", "≤ 1 s", "no"]  # fmt: skip
    assert cells(table, "a warm search, 10,000 shared notes")[3:] == ["1.40×", "≤ 1.5×", "yes"]


def test_the_proxy_rows_hold_streaming_to_the_agent_direct_and_what_it_adds_to_one_ms():
    proxy = {"sdk_direct_rate": 50_000.0, "sdk_proxy_rate": 40_000.0,
             "raw_direct_rate": 1_000_000.0, "raw_proxy_rate": 100_000.0, "direct_p50_ms": 0.03,
             "proxy_p50_ms": 0.25, "added_p50_ms": 0.22, "added_p95_ms": 0.5,
             "prompt_direct_p50_ms": 0.1, "prompt_off_p50_ms": 2.0, "prompt_on_p50_ms": 7.0}
    table = report.table(report.rows({"proxy": proxy}))
    assert cells(table, "`session/update` streaming through `acp-memory proxy`")[1:] == [
        "40,000/s", "same agent direct 50,000/s", "0.80×", "≥ 0.8×", "yes"]  # fmt: skip
    assert cells(table, "the same, a raw JSON-RPC agent")[1:] == [
        "100,000/s", "same agent direct 1,000,000/s", "0.10×", "—", "—"]  # fmt: skip
    assert cells(table, "what `acp-memory proxy` adds")[1:] == [
        "+0.220 ms (p95 +0.500 ms)", "direct 0.030 ms", "8.33×", "≤ 1 ms p50", "yes"]  # fmt: skip
    assert cells(table, "a prompt's round trip through `acp-memory proxy`")[1:] == [
        "7.00 ms", "memory off 2.00 ms, direct 0.10 ms", "3.50×", "—", "—"]  # fmt: skip


def test_the_tidy_rows_hold_the_planted_pairs_found_to_10_s_and_the_offline_tidy_to_0_9():
    tidy = {"duplicates": 500, "contradictions": 200, "groups": 700, "found": 0.97,
            "candidates_s": 11.0, "offline_tidy_precision": 0.95, "tidy_proposals": 700,
            "tidy_groups": 700, "tidy_s": 3.5}
    table = report.table(report.rows({"tidy": tidy}))
    assert cells(table, "tidy's candidates, 10,000 notes")[1:] == [
        "0.970 in 11.00 s", "700 planted pairs, 700 groups", "—", "≥ 0.95 within 10 s", "no"]
    assert cells(table, "the offline tidy's precision")[1:] == [
        "0.950", "700 proposals over 700 groups in 3.5 s", "—", "≥ 0.9", "yes"]  # fmt: skip
    (_, row) = report.rows({"tidy": {**tidy, "offline_tidy_precision": None}})
    assert row.met == "failed: the offline tidy proposed nothing"


def test_the_tidy_bench_measures_the_offline_tidys_precision_on_its_planted_pairs():
    sizes = ["--notes", "300", "--duplicates", "10", "--contradictions", "6"]
    figures = report.run_bench([sys.executable, str(BENCH / "tidy.py"), "--json", *sizes])
    assert isinstance(figures, dict), figures
    assert figures["tidy_groups"] == figures["groups"] == 16 == figures["tidy_proposals"]
    assert figures["offline_tidy_precision"] == 1.0


def test_the_shared_bench_prints_the_figures_its_rows_are_made_from(pg_server):
    # On the worker's server (its own start is the bench's default, timed nowhere).
    sizes = ["--notes", "60", "--writes", "2", "--finds", "2", "--dsn", pg_server.dsn]
    figures = report.run_bench([sys.executable, str(BENCH / "shared.py"), "--json", *sizes])
    assert isinstance(figures, dict), figures
    made = report.rows({"shared": figures})
    assert len(made) == 3 and not [r for r in made if r.met.startswith("failed")], made


def test_a_bench_whose_output_lacks_a_figure_fails_its_row_with_one_line():
    (row,) = report.rows({"wire": {"cold_ms": 300.0}})
    assert row.met == "failed: no usable figure (KeyError: 'echo_cold_ms')"


def test_a_bench_that_exits_with_an_error_gives_its_last_line_and_one_without_json_says_so():
    failing = "import sys; print('generated 10 notes'); sys.exit('ripgrep crashed\\n')"
    assert report.run_bench([sys.executable, "-c", failing]) == "ripgrep crashed"
    assert report.run_bench([sys.executable, "-c", "print('42 ms')"]) == (
        "no JSON last line: 42 ms")


@pytest.mark.parametrize(
    ("bench", "sizes"),
    [
        ("journal", ["--writes", "3", "--rounds", "1"]),
        ("search", ["--notes", "100"]),
        ("tidy", ["--notes", "100", "--duplicates", "3", "--contradictions", "2"]),
        ("proxy", ["--updates", "50", "--runs", "1", "--pings", "5", "--prompts", "1"]),
    ],
)
def test_a_bench_prints_a_json_last_line_the_report_makes_its_rows_from(
    bench: str, sizes: list[str]
):
    script = report.BENCHES[bench][0]
    figures = report.run_bench([sys.executable, str(BENCH / script), "--json", *sizes])
    assert isinstance(figures, dict), figures
    made = report.rows({bench: figures})
    # At this size a row may fail for want of a figure the bench could not measure (the build
    # done before a search during it finished), never for a figure its output lacks.
    assert made and not [r for r in made if "no usable figure" in r.met], made


@pytest.mark.parametrize(
    "script", sorted({argv[0] for argv in [*report.BENCHES.values(), *report.FULL.values()]})
)
def test_every_bench_the_report_runs_takes_json(script: str):
    done = subprocess.run([sys.executable, str(BENCH / script), "--help"],
                          capture_output=True, text=True, check=True, timeout=60)
    assert "--json" in done.stdout
