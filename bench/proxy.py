"""The proxy's figures: `session/update` streaming through `acp-memory proxy` beside the same
inner agent direct, and what the proxy adds to each message it forwards.

Run from the repo root: .venv/bin/python bench/proxy.py [--updates 20000] [--runs 5]
    [--pings 500] [--prompts 50] [--json]

The inner agent is this file run with `--inner-agent`: a minimal agent speaking raw JSON-RPC
(no SDK, so that the figures are the proxy's, not an SDK's), each message one write, as an
agent writes them. The client is raw too: newline-delimited JSON over pipes, read in large
blocks, an update counted by its method without parsing it, so that neither end is the
bottleneck. Every figure is measured against the same inner agent started directly, in the
same run, the two taking turns:
  - streaming, memory off: a prompt makes the agent send N agent_message_chunk updates, then
    its answer; updates per second from the prompt's write to the answer's arrival, the median
    of --runs. With bench/echo_agent.py, an agent on the official SDK, as a real agent streams
    (goal >= 0.8x direct); with the raw agent, the relay's own ceiling (direct, that agent and
    this client are a bare pipe no relay that parses JSON comes near: no goal);
  - latency per forwarded message, memory off: `_bench/ping` requests, one at a time, each
    answered by the agent with one session/update, then the answer. Every message carries the
    CLOCK_MONOTONIC time it was written (one clock for all the processes of a machine), and
    its reader times it one way: the request (editor to agent), the update and the answer
    (agent to editor). What the proxy adds: its p50 (p95) less the direct p50 (p95) (goal
    <= 1 ms p50);
  - a prompt with memory on (the built-in offline model; a note seeded so that each recall
    has a hit, its report appended to the prompt): the prompt's round trip through the proxy
    with memory on, with memory off, and direct; p50 and p95.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
READ_TIMEOUT_S = 120.0  # a peer silent this long has hung: the bench fails saying which
WARMUP_PINGS = 20
WARMUP_PROMPTS = 3
SEED = "# Indentation\n\nThe user prefers tabs for indentation in Python files.\n"
ASK = "Which indentation do I prefer in Python files?"
MEMORY_BLOCK = "<long_term_memory>"
GOAL_RATIO = 0.8
GOAL_ADDED_MS = 1.0


class BenchError(Exception):
    """A peer failed or answered otherwise than the bench expects; the message says which."""


# The inner agent (this file with --inner-agent).


def _write(data: bytes) -> None:
    while data:
        data = data[os.write(1, data) :]


def _send(message: dict[str, Any]) -> None:
    _write(json.dumps(message, separators=(",", ":")).encode() + b"\n")


def _update(session_id: str, text: str) -> dict[str, Any]:
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return {"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session_id, "update": chunk}}  # fmt: skip


def _prompt(params: dict[str, Any]) -> dict[str, Any]:
    session_id = params["sessionId"]
    blocks = [b.get("text", "") for b in params.get("prompt", []) if b.get("type") == "text"]
    words = blocks[0].split() if blocks else []
    if len(words) == 2 and words[0] == "STREAM":
        # One template and one write per update: the agent's own cost stays near nothing.
        head = json.dumps(_update(session_id, "@"), separators=(",", ":")).encode()
        before, after = head.split(b"@")
        for i in range(int(words[1])):
            _write(before + b"w%d " % i + after + b"\n")
    else:  # says whether a memory report reached it, as the last block
        recalled = len(blocks) > 1 and blocks[-1].startswith(MEMORY_BLOCK)
        _send(_update(session_id, "recalled" if recalled else "plain"))
    return {"stopReason": "end_turn"}


def inner_agent() -> None:
    """The raw agent: initialize, session/new, session/prompt and `_bench/ping`."""
    sessions = 0
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, msg_id = message.get("method"), message.get("id")
        if method is None or msg_id is None:  # session/cancel and the like need nothing
            continue
        params = message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": 1, "agentCapabilities": {"loadSession": False},
                "agentInfo": {"name": "bench-raw-agent", "version": "1"}, "authMethods": [],
            }  # fmt: skip
        elif method == "session/new":
            sessions += 1
            result = {"sessionId": f"raw_{sessions}"}
        elif method == "session/prompt":
            result = _prompt(params)
        elif method == "_bench/ping":
            request_ns = time.monotonic_ns() - params["t"]
            _send(_update(params["sessionId"], f"t={time.monotonic_ns()}"))
            result = {"requestNs": request_ns, "t": time.monotonic_ns()}
        else:
            error = {"code": -32601, "message": f"method not found: {method}"}
            _send({"jsonrpc": "2.0", "id": msg_id, "error": error})
            continue
        _send({"jsonrpc": "2.0", "id": msg_id, "result": result})


# The client.

OnUpdate = Callable[[bytes, int], None]


class Peer:
    """One agent process (the inner agent direct, or the proxy in front of it) and a raw
    client of it."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.log = name, log
        with log.open("wb") as stderr:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=stderr, env=env, bufsize=0,
                                         start_new_session=True)  # fmt: skip
        self.rest = b""
        self.lines: deque[tuple[bytes, int]] = deque()
        self.last_id = 0
        self.session_id = ""

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        except BrokenPipeError:
            raise BenchError(f"{self.name} closed its input: {self.last_log_line()}") from None

    def request(self, method: str, params: dict[str, Any]) -> int:
        self.last_id += 1
        self.send({"jsonrpc": "2.0", "id": self.last_id, "method": method, "params": params})
        return self.last_id

    def read(self) -> tuple[bytes, int]:
        """The next line and the CLOCK_MONOTONIC time of the read that brought it."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while not self.lines:
            if not select.select([fd], [], [], READ_TIMEOUT_S)[0]:
                raise BenchError(f"{self.name} sent nothing for {READ_TIMEOUT_S:.0f} s")
            data = os.read(fd, 1 << 20)
            now = time.monotonic_ns()
            if not data:
                raise BenchError(f"{self.name} closed its output: {self.last_log_line()}")
            *complete, self.rest = (self.rest + data).split(b"\n")
            self.lines.extend((line, now) for line in complete if line.strip())
        return self.lines.popleft()

    def answer(self, msg_id: int, on_update: OnUpdate | None = None) -> tuple[dict[str, Any], int]:
        """Read up to the answer to msg_id: it and its arrival time. Updates on the way go to
        on_update unparsed; a request of the proxy's own is refused (none is expected)."""
        while True:
            line, at = self.read()
            if b'"session/update"' in line:
                if on_update is not None:
                    on_update(line, at)
                continue
            message = json.loads(line)
            if "method" in message:
                if "id" in message:
                    error = {"code": -32601, "message": "the bench's client has no methods"}
                    self.send({"jsonrpc": "2.0", "id": message["id"], "error": error})
                continue
            if message.get("id") == msg_id:
                if "error" in message:
                    raise BenchError(f"{self.name} answered an error: {message['error']}")
                return message["result"], at

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.answer(self.request(method, params))[0]

    def open(self, cwd: Path) -> Peer:
        """initialize and session/new."""
        self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {
            "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}})
        self.session_id = self.call("session/new", {"cwd": str(cwd), "mcpServers": []})[
            "sessionId"]
        return self

    def prompt(self, text: str, on_update: OnUpdate | None = None) -> None:
        params = {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]}
        result, _ = self.answer(self.request("session/prompt", params), on_update)
        if result.get("stopReason") != "end_turn":
            raise BenchError(f"{self.name} ended a prompt with {result}")

    def last_log_line(self) -> str:
        with contextlib.suppress(OSError):
            lines = self.log.read_text(errors="replace").strip().splitlines()
            if lines:
                return lines[-1][:200]
        return "nothing on its stderr"

    def stop(self) -> None:
        """Close its input (the proxy then stops its inner agent) and reap it; SIGKILL to its
        process group if it takes too long."""
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@contextlib.contextmanager
def peers(*made: Callable[[], Peer]) -> Iterator[list[Peer]]:
    """The peers, started in order, stopped however the block ends."""
    started: list[Peer] = []
    try:
        for make in made:
            started.append(make())
        yield started
    finally:
        for peer in started:
            peer.stop()


def stream(peer: Peer, n: int) -> float:
    """Updates per second of one `STREAM n` prompt (n for the raw agent, "n" for the echo)."""
    counted = 0

    def count(line: bytes, at: int) -> None:
        nonlocal counted
        counted += b'"agent_message_chunk"' in line

    text = f"STREAM {n}" if "echo" not in peer.name else str(n)
    started = time.perf_counter()
    peer.prompt(text, count)
    elapsed = time.perf_counter() - started
    if counted != n:
        raise BenchError(f"{peer.name} forwarded {counted} of {n} updates")
    return n / elapsed


def ping(peer: Peer) -> list[float]:
    """One `_bench/ping`: the one-way milliseconds of its request, its update and its answer."""
    times: list[float] = []

    def update(line: bytes, at: int) -> None:
        text = json.loads(line)["params"]["update"]["content"]["text"]
        times.append((at - int(text.removeprefix("t="))) / 1e6)

    written = time.monotonic_ns()
    result, at = peer.answer(
        peer.request("_bench/ping", {"sessionId": peer.session_id, "t": written}), update)
    if len(times) != 1:
        raise BenchError(f"{peer.name} forwarded {len(times)} updates of a ping, not 1")
    return [result["requestNs"] / 1e6, *times, (at - result["t"]) / 1e6]


def prompt_ms(peer: Peer) -> tuple[float, bool]:
    """One ordinary prompt's round trip in ms, and whether a memory report reached the agent."""
    said: list[bytes] = []
    started = time.perf_counter()
    peer.prompt(ASK, lambda line, at: said.append(line))
    elapsed = (time.perf_counter() - started) * 1000
    return elapsed, any(b"recalled" in line for line in said)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def home_with(folder: Path, config: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(config, encoding="utf-8")
    return folder


def main(updates: int, runs: int, pings: int, prompts: int, as_json: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="acp-memory-bench-proxy-") as tmp:
        folder = Path(tmp)
        project = folder / "project"
        project.mkdir()
        off = home_with(folder / "off", "memory: {enable: false}\n")
        on = home_with(folder / "on", "memory: {enable: true, model: offline/default}\n")
        (on / "memory").mkdir()
        (on / "memory" / "indentation.md").write_text(SEED, encoding="utf-8")
        raw = [sys.executable, str(Path(__file__).resolve()), "--inner-agent"]
        echo = [sys.executable, str(ROOT / "bench" / "echo_agent.py")]
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("ACP_MEMORY_HOME", None)

        def direct(name: str, argv: list[str]) -> Callable[[], Peer]:
            return lambda: Peer(name, argv, env, folder / f"{name}.log").open(project)

        def proxied(name: str, home: Path, argv: list[str]) -> Callable[[], Peer]:
            proxy = [sys.executable, "-m", "acp_memory", "proxy", "--home", str(home),
                     "--cwd", str(project), "--log-level", "error", "--", *argv]  # fmt: skip
            return lambda: Peer(name, proxy, env, folder / f"{name}.log").open(project)

        rates: dict[str, list[float]] = {}
        with peers(direct("raw agent direct", raw), proxied("proxy, raw agent", off, raw),
                   direct("echo agent direct", echo),
                   proxied("proxy, echo agent", off, echo)) as streams:
            for peer in streams:
                stream(peer, min(updates, 100))  # warm-up: imports, the proxy's bundle
            for _ in range(runs):
                for peer in streams:
                    rates.setdefault(peer.name, []).append(stream(peer, updates))
        rate = {name: statistics.median(values) for name, values in rates.items()}

        ways: dict[str, list[float]] = {"direct": [], "proxy": []}
        spans: dict[str, list[float]] = {"direct": [], "proxy": [], "proxy, memory on": []}
        recalled = 0
        with peers(direct("raw agent direct", raw), proxied("proxy, raw agent", off, raw),
                   proxied("proxy, memory on", on, raw)) as (plain, relay, memory):
            for _ in range(WARMUP_PINGS):
                ping(plain), ping(relay)
            for _ in range(pings):
                ways["direct"] += ping(plain)
                ways["proxy"] += ping(relay)
            for _ in range(WARMUP_PROMPTS):
                prompt_ms(plain), prompt_ms(relay), prompt_ms(memory)
            for _ in range(prompts):
                spans["direct"].append(prompt_ms(plain)[0])
                spans["proxy"].append(prompt_ms(relay)[0])
                elapsed, reached = prompt_ms(memory)
                spans["proxy, memory on"].append(elapsed)
                recalled += reached

    raw_ratio = rate["proxy, raw agent"] / rate["raw agent direct"]
    echo_ratio = rate["proxy, echo agent"] / rate["echo agent direct"]
    med = statistics.median
    added_p50 = med(ways["proxy"]) - med(ways["direct"])
    added_p95 = p95(ways["proxy"]) - p95(ways["direct"])
    print(f"session/update streaming, {updates:,} updates, memory off (median of {runs}):")
    for name in rates:
        print(f"  {name:<20} {rate[name]:10,.0f} updates/s")
    print(f"  ratio proxy / direct: SDK echo agent {echo_ratio:.2f}x (goal >= {GOAL_RATIO}x),"
          f" raw agent {raw_ratio:.2f}x (the relay's ceiling, no goal)")
    print(f"one forwarded message, one way, {pings} pings x 3 messages, memory off:")
    for name, values in ways.items():
        print(f"  {name:<20} p50 {med(values):6.3f} ms   p95 {p95(values):6.3f} ms")
    print(f"  the proxy adds     p50 {added_p50:+6.3f} ms   p95 {added_p95:+6.3f} ms"
          f" (goal <= {GOAL_ADDED_MS:g} ms p50)")
    print(f"a prompt's round trip, {prompts} prompts (memory on: offline model, a seeded note):")
    for name, values in spans.items():
        print(f"  {name:<20} p50 {med(values):7.2f} ms   p95 {p95(values):7.2f} ms")
    print(f"  a memory report reached the agent in {recalled} of {prompts} prompts")
    if as_json:
        print(json.dumps({
            "updates": updates, "sdk_direct_rate": rate["echo agent direct"],
            "sdk_proxy_rate": rate["proxy, echo agent"],
            "raw_direct_rate": rate["raw agent direct"], "raw_proxy_rate": rate["proxy, raw agent"],
            "direct_p50_ms": med(ways["direct"]), "direct_p95_ms": p95(ways["direct"]),
            "proxy_p50_ms": med(ways["proxy"]), "proxy_p95_ms": p95(ways["proxy"]),
            "added_p50_ms": added_p50, "added_p95_ms": added_p95,
            "prompt_direct_p50_ms": med(spans["direct"]), "prompt_off_p50_ms": med(spans["proxy"]),
            "prompt_on_p50_ms": med(spans["proxy, memory on"]),
            "prompt_on_p95_ms": p95(spans["proxy, memory on"]),
            "recalled": recalled, "prompts": prompts,
        }))  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pings", type=int, default=500)
    parser.add_argument("--prompts", type=int, default=50)
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--inner-agent", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner_agent:
        inner_agent()
        sys.exit(0)
    try:
        main(args.updates, args.runs, args.pings, args.prompts, args.json)
    except BenchError as e:
        sys.exit(f"bench/proxy.py: {e}")
