"""Requests per second and latency of the HTTP API, against a trivial route of the same server.

Run from the repo root:
    .venv/bin/python bench/http_api.py [--requests 400] [--chats 200] [--flat 5000] [--json]

`acp-memory http` runs as its own process (as it is deployed) on a free loopback port, in a
throw-away home on the built-in offline model; httpx clients in this process send requests
over keep-alive connections, with 1 and with 16 at once. Rows:
  - the baseline: GET /v1/models, a static answer through the same guard, routing and JSON
    encoding, so what a row costs beyond it is that route's own work;
  - GET /coddy/sessions/{id}/memory/tree?root=global, a root holding 50 notes and 5 folders
    (a store per request, one directory scan, the entries' stat);
  - POST /v1/chat/completions, not streamed: a whole turn on the offline model, each client
    continuing its own session (its transcript appended, session.json rewritten with fsync);
    once with memory off, once with memory on (a memory run per turn, which the turn waits
    for: a child bundle, its own turns on the offline model, a search of the notes);
  - flat: `--flat` completions without X-Coddy-Session-Id (what OpenAI clients send: a new
    session each), 16 at once, with the server's descriptors and RSS when it started, at the
    start (past sessions.max_open, which it keeps open) and at the end (see bench/flat.py);
    the first session then still answers.
The client shares the machine's cores with the server: on a small machine its own cost (httpx
is not free) is part of every row, the baseline's included.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
from flat import Usage, report, usage

CONCURRENCY = (1, 16)
WARM_UP_CHATS = 100  # more than the default sessions.max_open (64)
NOTES = 50
FOLDERS = 5


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


@contextlib.asynccontextmanager
async def server(home: Path, project: Path) -> AsyncIterator[tuple[str, int]]:
    """`acp-memory http --port 0` in `home`; yields its base URL and pid, stops it with
    SIGTERM."""
    log = home / "server.log"
    with log.open("wb") as err:
        proc = await anyio.open_process(
            [sys.executable, "-m", "acp_memory", "http", "--home", str(home), "--cwd",
             str(project), "--port", "0", "--log-level", "warning"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        with anyio.fail_after(60):
            while not (found := re.search(r"listening on (http://\S+)", log.read_text())):
                if proc.returncode is not None:
                    raise SystemExit(f"the server exited: {log.read_text()}")
                await anyio.sleep(0.05)
        yield found.group(1), proc.pid
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have exited already
            proc.terminate()
        with anyio.move_on_after(30):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def measure(
    clients: int, requests: int, one: Callable[[int], Awaitable[None]]
) -> tuple[float, list[float]]:
    """`requests` calls of one(client index) by `clients` loops at once: seconds in all and
    each call's latency."""
    latencies: list[float] = []
    left = iter(range(requests))

    async def loop(index: int) -> None:
        for _ in left:
            start = time.perf_counter()
            await one(index)
            latencies.append(time.perf_counter() - start)

    began = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for index in range(clients):
            tg.start_soon(loop, index)
    return time.perf_counter() - began, latencies


def ok(resp: httpx.Response) -> httpx.Response:
    if resp.status_code != 200:
        request = resp.request
        raise SystemExit(f"{request.method} {request.url}: {resp.status_code} {resp.text}")
    return resp


class Rows:
    def __init__(self) -> None:
        self.rate: dict[tuple[str, int], float] = {}
        print(f"  {'':<48} {'clients':>7} {'req/s':>8} {'median':>9} {'p95':>9}")

    def add(self, name: str, clients: int, seconds: float, lat: list[float]) -> None:
        self.rate[name, clients] = len(lat) / seconds
        print(
            f"  {name:<48} {clients:>7} {len(lat) / seconds:>8.1f}"
            f" {statistics.median(lat) * 1000:>7.2f}ms {p95(lat) * 1000:>7.2f}ms",
            flush=True,
        )


async def routes(url: str, project: Path, requests: int, chats: int, rows: Rows) -> None:
    """The baseline, the tree and the chat completion on one server, at each concurrency."""
    limits = httpx.Limits(max_connections=max(CONCURRENCY), max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        sid = ok(await client.post("/coddy/sessions", json={"cwd": str(project)})).json()["id"]
        tree = f"/coddy/sessions/{sid}/memory/tree"
        chat_sessions = await chat_sessions_for(client, max(CONCURRENCY))

        async def models(_: int) -> None:
            ok(await client.get("/v1/models"))

        async def listing(_: int) -> None:
            entries = ok(await client.get(tree, params={"root": "global"})).json()["entries"]
            assert len(entries) == NOTES + FOLDERS

        chat = chatting(client, chat_sessions, "How are you?")
        for clients in CONCURRENCY:
            await measure(clients, 20, models)  # warm-up: connections, first-call imports
            rows.add("baseline: GET /v1/models", clients, *await measure(clients, requests, models))
            rows.add(
                f"GET memory/tree (root of {NOTES} notes, {FOLDERS} folders)", clients,
                *await measure(clients, requests, listing),
            )
            rows.add(
                "POST /v1/chat/completions (offline, memory off)", clients,
                *await measure(clients, chats, chat),
            )


def chat_body(text: str) -> dict[str, Any]:
    return {"model": "agent", "messages": [{"role": "user", "content": text}]}


async def chat_sessions_for(client: httpx.AsyncClient, count: int) -> list[str]:
    """One session per client, made by a first chat completion (its header names it)."""
    sessions = []
    for _ in range(count):
        resp = ok(await client.post("/v1/chat/completions", json=chat_body("Hello")))
        sessions.append(resp.headers["X-Coddy-Session-Id"])
    return sessions


def chatting(
    client: httpx.AsyncClient, sessions: list[str], text: str
) -> Callable[[int], Awaitable[None]]:
    """A chat completion of `text` by client `index`, continuing that client's session."""

    async def chat(index: int) -> None:
        headers = {"X-Coddy-Session-Id": sessions[index]}
        ok(await client.post("/v1/chat/completions", json=chat_body(text), headers=headers))

    return chat


async def memory_chats(url: str, chats: int, rows: Rows) -> None:
    limits = httpx.Limits(max_connections=max(CONCURRENCY))
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=300) as client:
        sessions = await chat_sessions_for(client, max(CONCURRENCY))
        chat = chatting(client, sessions, "What do you know about the deploys?")
        for clients in CONCURRENCY:
            rows.add(
                "POST /v1/chat/completions (offline, memory on)", clients,
                *await measure(clients, max(chats // 4, clients * 2), chat),
            )


def make_home(home: Path, config: str) -> None:
    """A home with its config and a global root of NOTES notes and FOLDERS folders."""
    memory = home / "memory"
    for i in range(FOLDERS):
        (memory / f"topic-{i}").mkdir(parents=True)
    for i in range(NOTES):
        (memory / f"note-{i:02d}.md").write_text(f"# Note {i}\n\nDeploys happen on day {i}.\n")
    (home / "config.yaml").write_text(config)


async def flat_chats(url: str, pid: int, completions: int) -> bool:
    """Completions without a session header, each a new session: is the server flat?"""
    limits = httpx.Limits(max_connections=max(CONCURRENCY))
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        started = usage(pid)
        first = ok(await client.post("/v1/chat/completions", json=chat_body("Hello")))
        sid = first.headers["X-Coddy-Session-Id"]

        async def new_session(_: int) -> None:
            ok(await client.post("/v1/chat/completions", json=chat_body("Hello")))

        await measure(max(CONCURRENCY), WARM_UP_CHATS, new_session)
        start = usage(pid)
        seconds, _ = await measure(max(CONCURRENCY), completions, new_session)
        end = usage(pid)
        # Let go long ago, loaded again on demand.
        await chatting(client, [sid], "Still there?")(0)
    points: list[tuple[str, Usage]] = [
        ("server started", started),
        (f"start: after {WARM_UP_CHATS + 1} completions", start),
        (f"end: after {completions:,} more", end),
    ]
    return report(
        f"{completions:,} POST /v1/chat/completions without a session header, "
        f"{max(CONCURRENCY)} at once ({completions / seconds:.0f}/s)",
        points,
    )


async def main(requests: int, chats: int, flat: int, as_json: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="acp-bench-http-") as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        print(
            f"acp-memory http (its own process) and httpx clients (this one), on 127.0.0.1; "
            f"{requests} requests a row, {chats} chat completions"
        )
        rows = Rows()
        home, memory_home = Path(tmp) / "home", Path(tmp) / "memory-home"
        make_home(home, "memory: {enable: false}\n")
        make_home(memory_home, "memory: {enable: true}\n")
        async with server(home, project) as (url, _):
            await routes(url, project, requests, chats, rows)
        if flat:
            flat_home = Path(tmp) / "flat-home"
            make_home(flat_home, "memory: {enable: false}\n")
            async with server(flat_home, project) as (url, pid):
                await flat_chats(url, pid, flat)
        async with server(memory_home, project) as (url, _):
            await memory_chats(url, chats, rows)
        for clients in CONCURRENCY:
            base = rows.rate["baseline: GET /v1/models", clients]
            tree = rows.rate[f"GET memory/tree (root of {NOTES} notes, {FOLDERS} folders)", clients]
            chat = rows.rate["POST /v1/chat/completions (offline, memory off)", clients]
            print(
                f"  {clients} client(s): tree / baseline req/s {tree / base:.2f}, "
                f"chat / baseline {chat / base:.2f}"
            )
        if as_json:  # req/s of each row, by its name and then its number of clients
            by_row: dict[str, dict[int, float]] = {}
            for (name, clients), rate in rows.rate.items():
                by_row.setdefault(name, {})[clients] = rate
            print(json.dumps({"rps": by_row}))


def _args() -> Any:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="per row (400)")
    parser.add_argument("--chats", type=int, default=200, help="chat completions a row (200)")
    parser.add_argument(
        "--flat", type=int, default=5000, help="completions of the flat row (5000; 0 skips it)"
    )
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    return parser.parse_args()


if __name__ == "__main__":
    args = _args()
    anyio.run(main, args.requests, args.chats, args.flat, args.json)
