"""Background pool throughput against bare processes, and spawn_agent overhead.

Run from the repo root: .venv/bin/python bench/pool.py [--tasks 300] [--concurrency 5]

Throughput: `--tasks` trivial commands (`true`) started and finished through a session's
TaskPool (record and log written, output followed, the end announced) by `--concurrency`
callers, each starting a task and waiting for its end. The baseline in the same run is the
same commands through bare anyio.open_process with the same argv, process group and drained
pipe, at the same concurrency: what is left is the pool's own cost (two meta.json writes with
fsync, the log file, the supervision). Also printed: each task's latency from the start call
to its final record (the baseline's: spawn to reaped), and the event loop's stalls beyond the
1 ms a ticking task asks for, in both runs (records and logs go through worker threads).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acp_memory.tasks.admission import PoolSettings  # noqa: E402
from acp_memory.tasks.pool import TaskPool  # noqa: E402
from acp_memory.tasks.process import SHELL  # noqa: E402

COMMAND = "true"


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def watch_loop(stalls: list[float], stop: anyio.Event) -> None:
    """The longest gaps between ticks a task asks for every millisecond."""
    last = time.perf_counter()
    while not stop.is_set():
        await anyio.sleep(0.001)
        now = time.perf_counter()
        stalls.append(now - last - 0.001)
        last = now


async def through_pool(tasks: int, concurrency: int) -> tuple[float, list[float], list[float]]:
    """Seconds for all tasks, each task's latency (start call to final record), loop stalls.

    `concurrency` callers each start a task and wait for its end, as a model starting
    commands one after another would; the pool's own queue stays out of it."""
    latencies: list[float] = []
    stalls: list[float] = []
    stop = anyio.Event()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp)
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_loop, stalls, stop)
            pool = TaskPool(tg, "sess_bench", bundle, PoolSettings(max_concurrent=concurrency))
            left = [tasks]

            async def caller() -> None:
                while left[0] > 0:
                    left[0] -= 1
                    t0 = time.perf_counter()
                    task = await pool.start_command(COMMAND, bundle)
                    record = await pool.wait(task)
                    latencies.append(time.perf_counter() - t0)
                    assert record.status == "succeeded", record

            began = time.perf_counter()
            async with anyio.create_task_group() as callers:
                for _ in range(concurrency):
                    callers.start_soon(caller)
            elapsed = time.perf_counter() - began
            stop.set()
            await pool.aclose()
            tg.cancel_scope.cancel()
    return elapsed, latencies, stalls


async def bare(tasks: int, concurrency: int) -> tuple[float, list[float], list[float]]:
    latencies: list[float] = []
    stalls: list[float] = []
    stop = anyio.Event()
    slots = anyio.Semaphore(concurrency)

    async def one() -> None:
        async with slots:
            t0 = time.perf_counter()
            proc = await anyio.open_process(
                [SHELL, "-c", COMMAND],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            async with proc:
                assert proc.stdout is not None
                async for _ in proc.stdout:
                    pass
                await proc.wait()
            latencies.append(time.perf_counter() - t0)

    began = time.perf_counter()
    async with anyio.create_task_group() as watcher:
        watcher.start_soon(watch_loop, stalls, stop)
        async with anyio.create_task_group() as tg:
            for _ in range(tasks):
                tg.start_soon(one)
        stop.set()
    return time.perf_counter() - began, latencies, stalls


async def main(tasks: int, concurrency: int) -> None:
    await through_pool(min(tasks, 20), concurrency)  # warm-up: imports, thread pool
    await bare(min(tasks, 20), concurrency)
    pool_s, pool_lat, pool_stalls = await through_pool(tasks, concurrency)
    bare_s, bare_lat, bare_stalls = await bare(tasks, concurrency)
    print(f"{tasks} x `{COMMAND}` via {SHELL} -c, {concurrency} at once")
    print(
        f"  {'':<42} {'tasks/s':>8} {'latency median':>15} {'p95':>8}"
        f" {'loop stall p99':>15} {'max':>8}"
    )

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:.1f}ms"

    def row(name: str, seconds: float, lat: list[float], stalls: list[float]) -> str:
        return (
            f"  {name:<42} {tasks / seconds:>8.1f} {ms(statistics.median(lat)):>15}"
            f" {ms(p95(lat)):>8} {ms(sorted(stalls)[int(0.99 * (len(stalls) - 1))]):>15}"
            f" {ms(max(stalls)):>8}"
        )

    print(row("pool (record, log, supervision, announce)", pool_s, pool_lat, pool_stalls))
    print(row("baseline: bare anyio.open_process", bare_s, bare_lat, bare_stalls))
    print(f"  ratio pool / baseline time: {pool_s / bare_s:.2f}")
    child, plain = await spawn_overhead(100)
    print("\nspawn_agent overhead, instant fake OpenAI model on 127.0.0.1, 100 children")
    print(f"  {'':<42} {'median':>8} {'p95':>8}")
    print(
        f"  {'child: start() -> its first model request':<42} "
        f"{ms(statistics.median(child)):>8} {ms(p95(child)):>8}"
    )
    print(
        f"  {'baseline: a turn of an existing session':<42} "
        f"{ms(statistics.median(plain)):>8} {ms(p95(plain)):>8}"
    )
    ratio = statistics.median(child) / statistics.median(plain)
    print(f"  ratio child / baseline (median): {ratio:.2f}")


async def spawn_overhead(children: int) -> tuple[list[float], list[float]]:
    """From Subagents.start (bundle created, task recorded, turn begun) to the child's first
    model request arriving; the baseline is the same engine's turn on a session that exists."""
    sys.path.insert(0, str(ROOT / "tests"))  # the test suite's fake model server
    from fakes.openai_server import FakeOpenAI
    from fakes.script import text

    from acp_memory.build import build_runner
    from acp_memory.config import Paths
    from acp_memory.config.models import AgentConfig, Config, ModelConfig, ProviderConfig
    from acp_memory.llm.registry import ProviderHub

    class Stamped(FakeOpenAI):
        def _next(self, request):  # type: ignore[no-untyped-def]
            arrivals.append(time.perf_counter())
            return super()._next(request)

    arrivals: list[float] = []
    child: list[float] = []
    plain: list[float] = []
    with tempfile.TemporaryDirectory(prefix="acp-bench-spawn-") as tmp:
        home = Path(tmp)
        paths = Paths(home=home, config_file=home / "c.yaml", sessions_dir=home / "s", cwd=home)
        async with Stamped(default=text("ok")) as server:
            cfg = Config(
                providers=[
                    ProviderConfig(name="f", type="openai", api_base=server.base_url, api_key="k")
                ],
                models=[ModelConfig(model="f/m")],
                agent=AgentConfig(model="f/m"),
            )
            async with ProviderHub(cfg) as hub:
                runner = build_runner(cfg, paths, hub)

                async def quiet(event: object) -> None:
                    return None

                async with runner.running():
                    parent = runner.store.create(cwd=str(home), model_id="f/m")
                    agents = runner.tool_context(parent).agents
                    for i in range(children + 5):
                        seen = len(arrivals)
                        start = time.perf_counter()
                        task = await agents.start(f"child {i}")
                        await runner.pool_for(parent).wait(task)
                        if i >= 5:
                            child.append(arrivals[seen] - start)
                        seen = len(arrivals)
                        start = time.perf_counter()
                        await runner.run_turn(parent, f"turn {i}", quiet)
                        if i >= 5:
                            plain.append(arrivals[seen] - start)
    return child, plain


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.tasks, args.concurrency)
