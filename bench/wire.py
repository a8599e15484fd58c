"""Wire figures for acp-memory beside a minimal echo agent on the official ACP Python SDK.

Both agents run as real subprocesses on stdio and are measured in the same run by the same
raw client (reading lines, not parsing models, so the client is never the bottleneck):
  - cold start: process spawn to the initialize answer, median of 10;
  - streaming: session/update throughput while one prompt streams 20,000 chunks.
Like for like, acp-memory streams from its built-in offline model (a `/stream N` line in the
prompt makes it stream N short chunks), as the echo agent streams N chunks of its own. A second
row streams from an instant fake OpenAI-compatible server on loopback (real HTTP, real SSE),
so that figure includes parsing the model's stream too.

    python bench/wire.py [--runs 10] [--chunks 20000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes.openai_server import FakeOpenAI  # noqa: E402
from fakes.script import text  # noqa: E402


async def _spawn(cmd: list[str], env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *cmd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        limit=64 * 1024 * 1024,
    )


async def _send(proc: asyncio.subprocess.Process, msg_id: int, method: str, params: dict) -> None:
    assert proc.stdin
    line = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
    proc.stdin.write(json.dumps(line).encode() + b"\n")
    await proc.stdin.drain()


async def _answer(proc: asyncio.subprocess.Process, msg_id: int) -> tuple[dict, int]:
    """Read until the answer to msg_id; returns it and the message chunks seen on the way."""
    assert proc.stdout
    chunks = 0
    while True:
        line = await proc.stdout.readline()
        if not line:
            raise RuntimeError("agent closed its output")
        if b'"session/update"' in line:
            # Only the streamed text counts, so that other updates cannot pad a figure.
            chunks += b'"agent_message_chunk"' in line
            continue
        msg = json.loads(line)
        if msg.get("id") == msg_id:
            return msg, chunks


async def _stop(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin
    proc.stdin.close()
    await asyncio.wait_for(proc.wait(), 30)


async def cold_start(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = await _spawn(cmd, env)
    await _send(proc, 1, "initialize", {"protocolVersion": 1})
    await _answer(proc, 1)
    elapsed = time.perf_counter() - started
    await _stop(proc)
    return elapsed


async def streaming(cmd: list[str], env: dict[str, str], cwd: str, prompt: str, n: int) -> float:
    proc = await _spawn(cmd, env)
    await _send(proc, 1, "initialize", {"protocolVersion": 1})
    await _answer(proc, 1)
    await _send(proc, 2, "session/new", {"cwd": cwd, "mcpServers": []})
    sid = (await _answer(proc, 2))[0]["result"]["sessionId"]
    started = time.perf_counter()
    await _send(
        proc, 3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": prompt}]}
    )
    answer, chunks = await _answer(proc, 3)
    elapsed = time.perf_counter() - started
    await _stop(proc)
    assert answer["result"]["stopReason"] == "end_turn", answer
    assert chunks == n, f"expected {n} message chunks, saw {chunks}"
    return chunks / elapsed


async def main(runs: int, chunks: int, as_json: bool = False) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        env = {**os.environ, "ACP_MEMORY_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"}
        ours = [sys.executable, "-m", "acp_memory", "--log-level", "error"]
        echo = [sys.executable, str(ROOT / "bench" / "echo_agent.py")]

        ours_cold = [await cold_start(ours, env) for _ in range(runs)]
        echo_cold = [await cold_start(echo, env) for _ in range(runs)]

        (home / "config.yaml").write_text(
            "agent: {model: offline/default}\nmemory: {enable: false}\n"
        )
        offline_rate = await streaming(ours, env, tmp, f"/stream {chunks}", chunks)
        echo_rate = await streaming(echo, env, tmp, str(chunks), chunks)

        words = " ".join(f"w{i}" for i in range(chunks))
        async with FakeOpenAI(default=text(words, chunks=chunks)) as server:
            (home / "config.yaml").write_text(
                "providers: [{name: fake, type: openai, api_key: k, "
                f"api_base: '{server.base_url}'}}]\n"
                "models: [{model: fake/bench}]\nagent: {model: fake/bench}\n"
                "memory: {enable: false}\n"
            )
            sse_rate = await streaming(ours, env, tmp, "stream please", chunks)

    cold_o, cold_e = statistics.median(ours_cold), statistics.median(echo_cold)
    print(f"cold start to initialize answer (median of {runs}):")
    print(f"  acp-memory      {cold_o * 1000:8.1f} ms")
    print(f"  SDK echo agent  {cold_e * 1000:8.1f} ms")
    print(f"  ratio acp-memory / echo: {cold_o / cold_e:.2f}x (lower is better)")
    print(f"session/update throughput streaming {chunks:,} chunks (higher is better):")
    print(f"  acp-memory, offline model    {offline_rate:10,.0f} updates/s")
    print(f"  SDK echo agent               {echo_rate:10,.0f} updates/s")
    print(f"  ratio acp-memory / echo: {offline_rate / echo_rate:.2f}x (like for like)")
    print(f"  acp-memory, fake OpenAI SSE  {sse_rate:10,.0f} updates/s (model stream over HTTP)")
    print(f"  ratio acp-memory (SSE) / echo: {sse_rate / echo_rate:.2f}x")
    if as_json:
        print(json.dumps({
            "cold_ms": cold_o * 1000, "echo_cold_ms": cold_e * 1000, "offline_rate": offline_rate,
            "echo_rate": echo_rate, "sse_rate": sse_rate,
        }))  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.chunks, args.json))
