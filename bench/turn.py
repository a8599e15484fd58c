"""The turn engine's own overhead per step, against the network round trip alone.

Run from the repo root: .venv/bin/python bench/turn.py [--turns 200] [--per-session 20]

An instant fake OpenAI server on loopback answers every request at once. Two intervals are
timed for each turn, with one clock (everything runs in one event loop):
  - from session/prompt leaving the client to the model request arriving at the server;
  - from the server's last byte of the answer to the prompt's answer reaching the client.
The floor is the same fake server driven by a bare httpx request carrying the same body bytes:
from httpx send to arrival, and from the last byte to the end of the httpx stream.
The client is a minimal JSON-RPC speaker (no schema checks), so its cost stays out.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # reuse the fake model servers of the test suite

from fakes.httpserver import Recorded, _Exchange  # noqa: E402
from fakes.openai_server import FakeOpenAI  # noqa: E402
from fakes.script import Reply, text  # noqa: E402
from rpc import RpcClient  # noqa: E402

from acp_memory.acp.server import build_agent, serve  # noqa: E402
from acp_memory.config import Paths  # noqa: E402
from acp_memory.config.models import AgentConfig, Config, ModelConfig, ProviderConfig  # noqa: E402
from acp_memory.jsonrpc.fdstream import FdReceiveStream, FdSendStream  # noqa: E402
from acp_memory.llm.registry import ProviderHub  # noqa: E402
from acp_memory.sessions import store as session_store  # noqa: E402

WARMUP = 10
SAVES: list[tuple[float, float]] = []  # (start, end) of every bundle write during the run


def _timed(write: Any) -> Any:
    def timed(path: Any, obj: Any, **options: Any) -> None:
        start = time.perf_counter()
        write(path, obj, **options)
        SAVES.append((start, time.perf_counter()))

    return timed


# Every bundle file goes through this one function; timing it separates disk from engine.
session_store.write_json_atomic = _timed(session_store.write_json_atomic)  # type: ignore[attr-defined]


def saving(start: float, end: float) -> float:
    """Seconds spent writing session bundles (atomic JSON, fsync) inside [start, end]."""
    return sum(b - a for a, b in SAVES if a >= start and b <= end)


class StampedOpenAI(FakeOpenAI):
    """The fake server, noting when each request arrived and when its answer's last byte left."""

    def __init__(self) -> None:
        super().__init__(default=text("Done."))
        self.arrived: list[float] = []
        self.last_byte: list[float] = []

    def _next(self, request: Recorded) -> Reply:
        self.arrived.append(time.perf_counter())  # the request has been read whole
        return super()._next(request)

    async def _respond(self, reply: Reply, request: Recorded, io: _Exchange) -> bool:
        keep = await super()._respond(reply, request, io)
        self.last_byte.append(time.perf_counter())
        return keep


async def engine_run(
    server: StampedOpenAI, home: Path, turns: int, per_session: int
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per turn: prompt sent -> request arrived, last byte -> prompt answered, and the bundle
    writes inside each of those two intervals."""
    cwd = home / "project"
    cwd.mkdir(parents=True)
    paths = Paths(
        home=home, config_file=home / "config.yaml", sessions_dir=home / "sessions", cwd=cwd
    )
    cfg = Config(
        providers=[
            ProviderConfig(name="fake", type="openai", api_base=server.base_url, api_key="k")
        ],
        models=[ModelConfig(model="fake/m")],
        agent=AgentConfig(model="fake/m"),
    )
    agent_sock, client_sock = socket.socketpair()
    to_request: list[float] = []
    to_answer: list[float] = []
    saves_before: list[float] = []
    saves_after: list[float] = []
    async with ProviderHub(cfg) as hub, anyio.create_task_group() as tg:
        agent = build_agent(cfg, paths, hub)
        receive, send = FdReceiveStream(agent_sock.fileno()), FdSendStream(agent_sock.fileno())
        tg.start_soon(serve, receive, send, cfg, paths, agent)
        reader, writer = await asyncio.open_connection(sock=client_sock)
        rpc = RpcClient(reader, writer)
        await rpc.call("initialize", {"protocolVersion": 1})
        session = ""
        for turn in range(WARMUP + turns):
            if turn % per_session == 0:
                new = await rpc.call("session/new", {"cwd": str(cwd), "mcpServers": []})
                session = new["sessionId"]
            seen = len(server.arrived)
            prompt = {"sessionId": session, "prompt": [{"type": "text", "text": f"turn {turn}"}]}
            sent = time.perf_counter()
            msg_id = await rpc.send("session/prompt", prompt)
            result = await rpc.answer(msg_id)
            answered = time.perf_counter()
            assert result["stopReason"] == "end_turn", result
            assert len(server.arrived) == seen + 1, "one model request per turn"
            if turn >= WARMUP:
                to_request.append(server.arrived[-1] - sent)
                to_answer.append(answered - server.last_byte[-1])
                saves_before.append(saving(sent, server.arrived[-1]))
                saves_after.append(saving(server.last_byte[-1], answered))
        writer.close()
        client_sock.shutdown(socket.SHUT_WR)  # end of input: the agent returns
    agent_sock.close()
    return to_request, to_answer, saves_before, saves_after


async def floor_run(
    server: StampedOpenAI, body: bytes, turns: int
) -> tuple[list[float], list[float]]:
    """The same request bytes through a bare httpx client, streamed to the end."""
    to_request: list[float] = []
    to_answer: list[float] = []
    url = server.base_url + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer k"}
    async with httpx.AsyncClient(timeout=None) as client:
        for turn in range(WARMUP + turns):
            request = client.build_request("POST", url, content=body, headers=headers)
            sent = time.perf_counter()
            response = await client.send(request, stream=True)
            async for _ in response.aiter_lines():
                pass
            done = time.perf_counter()
            await response.aclose()
            if turn >= WARMUP:
                to_request.append(server.arrived[-1] - sent)
                to_answer.append(done - server.last_byte[-1])
    return to_request, to_answer


async def append_run(history: int, size: int, appends: int, home: Path) -> dict[str, list[float]]:
    """Event-loop time per transcript append at `history` messages of `size` bytes: today's
    append against the whole-file atomic rewrite on the loop that it replaced, in one run."""
    from acp_memory.atomic import write_json_atomic
    from acp_memory.sessions.model import Transcript, TranscriptMessage
    from acp_memory.sessions.store import SessionStore

    session = SessionStore(home / "append").create(cwd=str(home), model_id="offline/default")
    session.messages.extend(
        TranscriptMessage(role="assistant", content=f"{i} " + "x" * size) for i in range(history)
    )
    for i in range(2):  # the first two appends after a load write the file whole
        await session.append(TranscriptMessage(role="assistant", content=f"warm {i}"))
    out: dict[str, list[float]] = {"loop_cpu": [], "stall": [], "wall": [], "rewrite": []}
    for i in range(appends):
        message = TranscriptMessage(role="assistant", content=f"new {i} " + "y" * size)
        cpu, wall = time.thread_time(), time.perf_counter()
        await session.append(message)
        out["loop_cpu"].append(time.thread_time() - cpu)  # this thread is the event loop's
        out["wall"].append(time.perf_counter() - wall)
        # The replaced way: the whole transcript dumped and rewritten atomically, on the loop.
        start = time.perf_counter()
        write_json_atomic(home / "rewrite.json", Transcript(messages=session.messages).dump())
        out["rewrite"].append(time.perf_counter() - start)
    for _ in range(appends):
        # Separately, what another session sees: the longest gap between two loop iterations.
        beats: list[float] = []
        done = anyio.Event()

        async def heartbeat(beats: list[float] = beats, done: anyio.Event = done) -> None:
            while not done.is_set():
                beats.append(time.perf_counter())
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat)
            await anyio.lowlevel.checkpoint()
            await session.append(TranscriptMessage(role="assistant", content="y" * size))
            done.set()
        out["stall"].append(max(b - a for a, b in itertools.pairwise(beats)))
    session.close()
    return out


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def row(label: str, values: list[float]) -> str:
    return f"  {label:<38} {statistics.median(values) * 1e3:8.3f} ms {p95(values) * 1e3:8.3f} ms"


def rest(total: list[float], part: list[float]) -> list[float]:
    return [t - p for t, p in zip(total, part, strict=True)]


def ratio(label: str, engine: list[float], floor: list[float]) -> str:
    med = statistics.median(engine) / statistics.median(floor)
    tail = p95(engine) / p95(floor)
    return f"  {label:<38} {med:8.1f} x  {tail:8.1f} x"


async def main(turns: int, per_session: int) -> None:
    with tempfile.TemporaryDirectory(prefix="acp-bench-turn-") as tmp:
        async with StampedOpenAI() as server:
            engine = await engine_run(server, Path(tmp) / "home", turns, per_session)
            body = server.requests[-1].body  # what the engine sent: the floor sends the same
            floor = await floor_run(server, body, turns)
    print(
        f"acp-memory turn overhead: {turns} turns ({per_session} per session, {WARMUP} warm-up "
        f"turns not counted), instant fake OpenAI model on 127.0.0.1,\n"
        f"request body {len(body)} bytes, sessions under {tmp.rsplit('/', 1)[0]} "
        f"(atomic JSON writes with fsync),\n"
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores\n"
    )
    print(f"  {'':<38} {'median':>11} {'p95':>11}")
    print("session/prompt -> model request arrives")
    print(row("engine (client, agent, engine, httpx)", engine[0]))
    print(row("floor (bare httpx send -> arrival)", floor[0]))
    print(ratio("ratio engine / floor", engine[0], floor[0]))
    print(row("of the engine's: bundle writes", engine[2]))
    print(row("of the engine's: everything else", rest(engine[0], engine[2])))
    print("model's last byte -> prompt answered")
    print(row("engine (httpx, engine, agent, client)", engine[1]))
    print(row("floor (last byte -> httpx stream end)", floor[1]))
    print(ratio("ratio engine / floor", engine[1], floor[1]))
    print(row("of the engine's: bundle writes", engine[3]))
    print(row("of the engine's: everything else", rest(engine[1], engine[3])))
    with tempfile.TemporaryDirectory(prefix="acp-bench-append-") as tmp:
        history, size = 1500, 4000
        appended = await append_run(history, size, 50, Path(tmp))
    print(
        f"\ntranscript append at {history} messages ({history * size / 1e6:.0f} MB), "
        f"50 appends of {size} bytes"
    )
    print(row("event-loop CPU per append (goal <= 2 ms)", appended["loop_cpu"]))
    print(row("longest event-loop stall during it", appended["stall"]))
    print(row("append, awaited end to end (disk incl.)", appended["wall"]))
    print(row("baseline: whole rewrite on the loop", appended["rewrite"]))
    print(ratio("ratio baseline / event-loop CPU", appended["rewrite"], appended["loop_cpu"]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--per-session", type=int, default=20, help="turns before a new session")
    args = parser.parse_args()
    started = time.perf_counter()
    asyncio.run(main(args.turns, args.per_session))
    print(f"\n(ran in {time.perf_counter() - started:.1f}s)")
