"""Whether one ACP connection stays flat under many sessions: `session/new` N times.

Run from the repo root: .venv/bin/python bench/acp_sessions.py [--sessions 10000]

`acp-memory acp` runs as its own process (as an editor starts it) in a throw-away home on the
built-in offline model, memory off; one raw JSON-RPC client (bench/rpc.py) sends `session/new`
one after another on the one connection. Its descriptors and RSS are read from /proc when it
started, at the start (past sessions.max_open, which it keeps open) and at the end (see
bench/flat.py); then the first session, let go long ago, answers a prompt.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from flat import report, usage
from rpc import RpcClient

WARM_UP_SESSIONS = 100  # more than the default sessions.max_open (64)


async def main(sessions: int) -> None:
    with tempfile.TemporaryDirectory(prefix="acp-bench-sessions-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        home.mkdir()
        project.mkdir()
        (home / "config.yaml").write_text("memory: {enable: false}\n")
        env = {**os.environ, "ACP_MEMORY_HOME": str(home)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "acp_memory", "acp", "--log-level", "error",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
            limit=64 * 1024 * 1024,
        )  # fmt: skip
        assert proc.stdin and proc.stdout
        rpc = RpcClient(proc.stdout, proc.stdin)
        try:
            await rpc.call("initialize", {"protocolVersion": 1})
            started = usage(proc.pid)
            new = {"cwd": str(project), "mcpServers": []}
            first = (await rpc.call("session/new", new))["sessionId"]
            for _ in range(WARM_UP_SESSIONS):
                await rpc.call("session/new", new)
            start = usage(proc.pid)
            began = time.perf_counter()
            for _ in range(sessions):
                await rpc.call("session/new", new)
            seconds = time.perf_counter() - began
            end = usage(proc.pid)
            prompt = {"sessionId": first, "prompt": [{"type": "text", "text": "Still there?"}]}
            answer = await rpc.call("session/prompt", prompt)
        finally:
            proc.stdin.close()
            await asyncio.wait_for(proc.wait(), 60)
    print(f"acp-memory acp (its own process), one connection on stdio, {sessions:,} sessions")
    report(
        f"{sessions:,} session/new on one connection ({sessions / seconds:.0f}/s)",
        [
            ("agent started", started),
            (f"start: after {WARM_UP_SESSIONS + 1} sessions", start),
            (f"end: after {sessions:,} more", end),
        ],
    )
    print(f"  then a prompt in the first session: {answer['stopReason']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000, help="session/new calls (10000)")
    args = parser.parse_args()
    asyncio.run(main(args.sessions))
