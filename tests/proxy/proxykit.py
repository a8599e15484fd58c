"""`acp-memory proxy` as a real process in front of tests/fakes/sdk_inner_agent.py, driven by
the official SDK client (tests/harness.py's editor, every line it gets schema-checked)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp.schema import (
    BooleanConfigOptionCapabilities,
    ClientCapabilities,
    ClientSessionCapabilities,
    FileSystemCapabilities,
    SessionConfigOptionsCapabilities,
)
from harness import Editor, RecordingClient, subprocess_agent

INNER_AGENT = Path(__file__).resolve().parents[1] / "fakes" / "sdk_inner_agent.py"
INNER_COMMAND = (sys.executable, str(INNER_AGENT))
MEMORY_OPEN, MEMORY_CLOSE = "<long_term_memory>", "</long_term_memory>"
# A turn of the offline models takes milliseconds; this only bounds a stuck one.
BOUND_S = 60

# Memory on, the built-in offline model, a wait no loaded machine outlasts.
MEMORY_ON = "memory: {enable: true, wait_seconds: 120}\n"
# Each write of a memory run asked to the user first.
REVIEW_ASK = "memory: {enable: true, wait_seconds: 120, review: ask}\n"


@dataclass
class InnerLog:
    """What the inner agent received, as it arrived: one JSON object a line."""

    path: Path

    def records(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def methods(self) -> list[str]:
        return [r["method"] for r in self.records()]

    def received(self, method: str) -> list[Any]:
        return [r["params"] for r in self.records() if r["method"] == method]

    def prompts(self) -> list[list[str]]:
        """Each session/prompt's text blocks, in order."""
        return [
            [b["text"] for b in p["prompt"] if b.get("type") == "text"]
            for p in self.received("session/prompt")
        ]

    def pid(self) -> int:
        pids = {r["pid"] for r in self.records()}
        assert len(pids) == 1, f"more than one inner agent process: {pids}"
        return int(pids.pop())


def bundle_of(home: Path, inner_session_id: str) -> Path:
    """The proxy's bundle of an inner session: named by a hash, never by the untrusted id."""
    digest = hashlib.sha256(inner_session_id.encode()).hexdigest()[:24]
    return home / "sessions" / "proxy" / f"sess_{digest}"


def capabilities(memory_runs: str = "session_update") -> ClientCapabilities:
    """An editor with files, terminals and boolean config options, asking for memory_run
    updates in the form `memory_runs`."""
    return ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
        terminal=True,
        session=ClientSessionCapabilities(
            config_options=SessionConfigOptionsCapabilities(
                boolean=BooleanConfigOptionCapabilities()
            )
        ),
        field_meta={"memoryRunUpdates": memory_runs},
    )


async def open_session(ed: Editor, cwd: Path, caps: ClientCapabilities | None = None) -> Any:
    """initialize and session/new through the proxy; the session/new answer."""
    await ed.conn.initialize(protocol_version=1, client_capabilities=caps or capabilities())
    return await ed.conn.new_session(cwd=str(cwd), mcp_servers=[])


def memory_runs(ed: Editor, session_id: str) -> list[str]:
    """The statuses of the memory_run updates the proxy sent for `session_id` (the SDK client
    cannot parse this update: read from the wire)."""
    return [
        u["status"]
        for m in ed.checker.sent
        if isinstance(m, dict)
        and m.get("method") == "session/update"
        and m["params"].get("sessionId") == session_id
        and (u := m["params"]["update"]).get("sessionUpdate") == "memory_run"
    ]


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(text, encoding="utf-8")


@contextlib.asynccontextmanager
async def proxy(
    home: Path,
    cwd: Path,
    log: Path,
    *,
    client: RecordingClient | None = None,
    inner: Sequence[str] = INNER_COMMAND,
) -> AsyncIterator[tuple[Editor, InnerLog]]:
    """`acp-memory proxy --home HOME -- python sdk_inner_agent.py` (or `inner`) in `cwd`, the
    SDK client as its editor; yields the editor and the inner agent's log."""
    async with subprocess_agent(
        home,
        "proxy",
        "--home",
        str(home),
        "--",
        *inner,
        cwd=cwd,
        client=client,
        env={"INNER_AGENT_LOG": str(log)},
    ) as ed:
        yield ed, InnerLog(log)
