"""What the memory run adds to a turn, and the agent's peak RSS with memory on.

Run from the repo root: .venv/bin/python bench/memory_run.py [--turns 200] [--rss-turns 500]
    [--json]

An instant fake OpenAI server on loopback answers the parent at once ("Done.") and the memory
child at once (a one-line report, no tool calls), telling them apart by the memory tools the
child is offered.

Overhead: two agents served in this event loop (as bench/turn.py serves one), one with
memory.enable and one without, same server, turns alternating between them. Per turn: from
session/prompt leaving the client to the parent's first model request arriving at the server.
With memory on that interval holds the run's start (child bundle, task record, its engine),
the child's own model call, and its delivery; the child's model time (from its provider
call to the end of its stream, as the child sees it) is timed per turn and taken out. What is
left, less the memory-off interval, is what the memory machinery adds (goal <= 20 ms p50).
Counted per turn as well, both ways, since they explain the time on a given disk and load:
the disk syncs (fsync, fdatasync: every durable write ends in one) and the trips to worker
threads before the parent's request, and the process CPU of the whole turn.

Peak RSS: `python -m acp_memory acp` as a subprocess, `--rss-turns` turns with memory on, then
the kernel's high-water mark (VmHWM) of that process; the same for a memory-off agent after it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # reuse the fake model server of the test suite

from fakes.httpserver import Recorded  # noqa: E402
from fakes.openai_server import FakeOpenAI  # noqa: E402
from fakes.script import Reply, text  # noqa: E402
from rpc import RpcClient  # noqa: E402

from acp_memory.acp.server import build_agent, serve  # noqa: E402
from acp_memory.config import Paths  # noqa: E402
from acp_memory.config.models import (  # noqa: E402
    AgentConfig,
    Config,
    MemoryConfig,
    ModelConfig,
    ProviderConfig,
)
from acp_memory.jsonrpc.fdstream import FdReceiveStream, FdSendStream  # noqa: E402
from acp_memory.llm.registry import ModelHandle, ProviderHub  # noqa: E402
from acp_memory.llm.types import ChatRequest, StreamEvent  # noqa: E402

WARMUP = 10
PARENT = text("Done.")
CHILD = text("Already on disk:\n- The user prefers tabs.")  # a report: no tool calls
GOAL_MS = 20.0
GOAL_RSS_MB = 100.0
SYNCS: list[tuple[float, float]] = []  # (start, end) of every fsync and fdatasync of the run
HOPS: list[float] = []  # when each call to a worker thread began


def _timed(sync: Any) -> Any:
    def timed(fd: int) -> None:
        start = time.perf_counter()
        sync(fd)
        SYNCS.append((start, time.perf_counter()))

    return timed


# Every durable write of a bundle, a task record or a note ends in one of these two: timing
# them separates the disk's latency from the machinery's own work.
os.fsync = _timed(os.fsync)
os.fdatasync = _timed(os.fdatasync)
_to_thread = anyio.to_thread.run_sync


async def _counted(func: Any, *args: Any, **kwargs: Any) -> Any:
    HOPS.append(time.perf_counter())
    return await _to_thread(func, *args, **kwargs)


# File work goes to worker threads; on a busy machine each trip waits for a core.
anyio.to_thread.run_sync = _counted


def syncing(start: float, end: float) -> tuple[float, int]:
    """Seconds spent in fsync and fdatasync inside [start, end] (worker threads included),
    and how many there were."""
    inside = [b - a for a, b in SYNCS if a >= start and b <= end]
    return sum(inside), len(inside)


def hops(start: float, end: float) -> int:
    return sum(1 for t in HOPS if start <= t <= end)


class Stamped(FakeOpenAI):
    """The fake server, noting when each parent and each child request arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.parent: list[float] = []
        self.child: list[float] = []

    def _next(self, request: Recorded) -> Reply:
        now = time.perf_counter()
        self.requests.clear()  # nobody reads them here: keep the bench's own memory flat
        tools = {t["function"]["name"] for t in (request.json or {}).get("tools", [])}
        if "memory_search" in tools:
            self.child.append(now)
            return CHILD
        self.parent.append(now)
        return PARENT


class TimedProvider:
    """A provider that notes how long each of its streams took, start to last event."""

    def __init__(self, inner: Any, spans: list[tuple[float, float]]) -> None:
        self.inner, self.spans, self.name = inner, spans, inner.name

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        start = time.perf_counter()
        async for event in self.inner.stream(request):
            yield event
        self.spans.append((start, time.perf_counter()))


def config(base_url: str, memory: bool) -> Config:
    return Config(
        providers=[ProviderConfig(name="fake", type="openai", api_base=base_url, api_key="k")],
        models=[ModelConfig(model="fake/m")],
        agent=AgentConfig(model="fake/m"),
        memory=MemoryConfig(enable=memory),
    )


class Driver:
    """One in-process agent on a socket pair, and the client side of it."""

    def __init__(self, home: Path, cfg: Config, per_session: int) -> None:
        self.cwd = home / "project"
        self.cwd.mkdir(parents=True)
        self.paths = Paths(home, home / "config.yaml", home / "sessions", self.cwd)
        self.cfg = cfg
        self.per_session = per_session
        self.child_spans: list[tuple[float, float]] = []
        self.turns = 0
        self.session = ""
        self.rpc: RpcClient

    def start(self, tg: Any, hub: ProviderHub) -> socket.socket:
        agent = build_agent(self.cfg, self.paths, hub)
        child_model_for = agent.runner.child_model_for

        def timed(model_id: str) -> ModelHandle:
            handle = child_model_for(model_id)
            return ModelHandle(
                handle.model_id, TimedProvider(handle.provider, self.child_spans), handle.config
            )

        agent.runner.child_model_for = timed
        agent_sock, self.client_sock = socket.socketpair()
        receive, send = FdReceiveStream(agent_sock.fileno()), FdSendStream(agent_sock.fileno())
        tg.start_soon(serve, receive, send, self.cfg, self.paths, agent)
        return agent_sock

    async def connect(self) -> None:
        reader, writer = await asyncio.open_connection(sock=self.client_sock)
        self.rpc = RpcClient(reader, writer)
        await self.rpc.call("initialize", {"protocolVersion": 1})

    async def turn(self, server: Stamped) -> dict[str, float]:
        """One prompt: seconds to the parent's first request ("wait"); in them the child's
        model seconds, the disk syncs (seconds, count) and the worker-thread trips; and the
        process CPU seconds of the whole turn, all threads."""
        if self.turns % self.per_session == 0:
            new = await self.rpc.call("session/new", {"cwd": str(self.cwd), "mcpServers": []})
            self.session = new["sessionId"]
        self.turns += 1
        seen, spans = len(server.parent), len(self.child_spans)
        prompt = {"sessionId": self.session, "prompt": [{"type": "text", "text": "hi"}]}
        cpu = time.process_time()
        sent = time.perf_counter()
        result = await self.rpc.call("session/prompt", prompt)
        assert result["stopReason"] == "end_turn", result
        cpu = time.process_time() - cpu
        arrived = server.parent[seen]
        child = sum(b - a for a, b in self.child_spans[spans:] if b <= arrived)
        sync_s, syncs = syncing(sent, arrived)
        return {
            "wait": arrived - sent, "child": child, "sync": sync_s, "syncs": syncs,
            "hops": hops(sent, arrived), "cpu": cpu,
        }  # fmt: skip

    def close(self) -> None:
        self.rpc.writer.close()
        self.client_sock.shutdown(socket.SHUT_WR)  # end of input: the agent returns


async def overhead(turns: int, per_session: int) -> dict[str, dict[str, list[float]]]:
    """Per side ("on", "off"), each figure of Driver.turn over the counted turns."""
    out: dict[str, dict[str, list[float]]] = {"on": {}, "off": {}}
    with tempfile.TemporaryDirectory(prefix="acp-bench-memory-") as tmp:
        async with Stamped() as server:
            on = Driver(Path(tmp) / "on", config(server.base_url, True), per_session)
            off = Driver(Path(tmp) / "off", config(server.base_url, False), per_session)
            async with ProviderHub(on.cfg) as hub, anyio.create_task_group() as tg:
                socks = [on.start(tg, hub), off.start(tg, hub)]
                await on.connect()
                await off.connect()
                for turn in range(WARMUP + turns):
                    # Alternating turns: both sides see the same machine at the same moment.
                    for side, driver in (("on", on), ("off", off)):
                        figures = await driver.turn(server)
                        if turn >= WARMUP:
                            for key, value in figures.items():
                                out[side].setdefault(key, []).append(value)
                assert len(on.child_spans) == WARMUP + turns, "one child model call per turn"
                assert not off.child_spans, "no memory run with memory off"
                on.close()
                off.close()
            for sock in socks:
                sock.close()
    return out


async def peak_rss(turns: int, per_session: int, memory: bool, base_url: str) -> float:
    """MB: VmHWM of a `python -m acp_memory` process after `turns` turns."""
    with tempfile.TemporaryDirectory(prefix="acp-bench-rss-") as tmp:
        home, cwd = Path(tmp) / "home", Path(tmp) / "project"
        home.mkdir()
        cwd.mkdir()
        (home / "config.yaml").write_text(
            json.dumps(config(base_url, memory).model_dump(exclude_defaults=True))
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "acp_memory", "acp", "--home", str(home), "--cwd", str(cwd),
            "--log-level", "warning",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            limit=16 * 1024 * 1024,
        )  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        rpc = RpcClient(proc.stdout, proc.stdin)
        await rpc.call("initialize", {"protocolVersion": 1})
        session = ""
        for turn in range(turns):
            if turn % per_session == 0:
                new = await rpc.call("session/new", {"cwd": str(cwd), "mcpServers": []})
                session = new["sessionId"]
            prompt = {"sessionId": session, "prompt": [{"type": "text", "text": f"turn {turn}"}]}
            result = await rpc.call("session/prompt", prompt)
            assert result["stopReason"] == "end_turn", result
        status = await anyio.Path(f"/proc/{proc.pid}/status").read_text()
        proc.stdin.close()
        await proc.wait()
    kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return kb / 1024


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def row(label: str, values: list[float]) -> str:
    return pair(label, [statistics.median(values), p95(values)])


def count(label: str, off: list[float], on: list[float]) -> str:
    return f"  {label:<46} {statistics.median(off):8.0f}    {statistics.median(on):8.0f}"


def pair(label: str, seconds: list[float]) -> str:
    return f"  {label:<46} {seconds[0] * 1e3:8.2f} ms {seconds[1] * 1e3:8.2f} ms"


async def main(turns: int, per_session: int, rss_turns: int, as_json: bool = False) -> None:
    started = time.perf_counter()
    figures = await overhead(turns, per_session)
    on, off = figures["on"], figures["off"]
    less_child = [w - c for w, c in zip(on["wait"], on["child"], strict=True)]
    med = statistics.median

    def added(a: list[float], b: list[float]) -> list[float]:
        return [med(a) - med(b), p95(a) - p95(b)]

    print(
        f"acp-memory memory run: {turns} turns each way ({per_session} per session, {WARMUP} "
        f"warm-up turns not counted), instant fake OpenAI model on 127.0.0.1,\n"
        f"bundles under {tempfile.gettempdir()} (atomic writes with fsync), "
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} at the end\n"
    )
    print(f"session/prompt -> first parent model request {'median':>14} {'p95':>11}")
    print(row("memory off (baseline)", off["wait"]))
    print(row("memory on", on["wait"]))
    print(row("  of which the child's own model call", on["child"]))
    print(row("memory on, less the child's model call", less_child))
    gap = added(less_child, off["wait"])
    verdict = "met" if gap[0] * 1e3 <= GOAL_MS else "MISSED"
    print(
        pair("added by memory (on - child - off)", gap) + f"   goal <= {GOAL_MS:g} ms p50: "
        f"{verdict}"
    )
    sync_gap = added(on["sync"], off["sync"])
    print(pair("  of which disk syncs (fsync, fdatasync)", sync_gap))
    print(
        pair(
            "  the rest: CPU, waits for worker threads",
            [a - b for a, b in zip(gap, sync_gap, strict=True)],
        )
    )
    ratio = med(on["wait"]) / med(off["wait"])
    ratio_less = med(less_child) / med(off["wait"])
    print(f"  ratio on / off (median): {ratio:.2f}; less the child's model call: {ratio_less:.2f}")
    print(f"\nper turn, median {'off':>34} {'on':>11}")
    print(count("disk syncs before the parent's request", off["syncs"], on["syncs"]))
    print(count("worker-thread trips before it", off["hops"], on["hops"]))
    print(
        f"  {'process CPU, whole turn, all threads':<46} {med(off['cpu']) * 1e3:8.2f} ms "
        f"{med(on['cpu']) * 1e3:8.2f} ms"
    )
    async with Stamped() as server:
        rss_on = await peak_rss(rss_turns, per_session, True, server.base_url)
        rss_off = await peak_rss(rss_turns, per_session, False, server.base_url)
    print(f"\npeak RSS (VmHWM) of `python -m acp_memory acp` after {rss_turns} turns")
    print(f"  {'memory off (baseline)':<46} {rss_off:8.1f} MB")
    print(
        f"  {'memory on':<46} {rss_on:8.1f} MB   goal <= {GOAL_RSS_MB:g} MB: "
        f"{'met' if rss_on <= GOAL_RSS_MB else 'MISSED'}"
    )
    print(f"  ratio on / off: {rss_on / rss_off:.2f}")
    print(f"\n(ran in {time.perf_counter() - started:.1f}s)")
    if as_json:
        print(json.dumps({
            "off_p50_ms": med(off["wait"]) * 1e3, "on_less_child_p50_ms": med(less_child) * 1e3,
            "added_p50_ms": gap[0] * 1e3, "added_p95_ms": gap[1] * 1e3,
            "syncs_off": med(off["syncs"]), "syncs_on": med(on["syncs"]),
            "hops_off": med(off["hops"]), "hops_on": med(on["hops"]),
            "rss_off_mb": rss_off, "rss_on_mb": rss_on,
        }))  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--per-session", type=int, default=20, help="turns before a new session")
    parser.add_argument("--rss-turns", type=int, default=500)
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.per_session, args.rss_turns, args.json))
