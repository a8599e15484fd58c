"""End to end: long-term memory across sessions, over stdio with the official ACP client.

    .venv/bin/python examples/acp/acp_e2e_memory.py [--config PATH] [--keep] [--timeout SECONDS]

From the repository root, with the README's venv (`.venv/bin/python`: it has the packages
this needs; a bare `python` may not).

Starts `python -m acp_memory` as an editor does, in a throw-away home, and checks:
  1. a note written on disk beforehand is recalled: the answer names its fact;
  2. "Remember that ..." saves the new fact as a note on disk;
  3. a second agent process, in a fresh session, answers with that fact: only the disk has it;
  4. each memory run announced on the wire left its child bundle under the session's
     subagents/, with subagentName "memory" and parentSessionId naming the session.

It runs on the built-in offline model (no key, no network) unless --config PATH (or
$ACP_MEMORY_E2E_CONFIG) names a config, whose models it then uses: memory is turned on and the
notes and sessions stay in the throw-away home whatever that file says; its ${VAR}s come from
the environment. The checks look for the facts (in the answers, in the notes), never for a
model's wording. Exit status 0 when every check passes, 1 with one line saying which failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml
from acp import RequestError, connect_to_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities

SEED = ("servers.md", "# Servers\n\nThe staging server is called bramble.\n", "bramble")
ASK_SEED = "What is the staging server called? Answer in one short sentence."
PERSIST = "Remember that my favourite fruit is the mango."
ASK_NEW = "What is my favourite fruit? Answer in one short sentence."
NEW_FACT = "mango"
# `_acp_memory/memory_run`, as the SDK hands extension notifications over: without the "_".
MEMORY_RUN = "acp_memory/memory_run"
# The SDK cannot parse a memory_run session update (the default form): this client asks for
# the extension notification at initialize, whatever the config says.
CAPABILITIES = ClientCapabilities(field_meta={"memoryRunUpdates": "ext_notification"})


class CheckFailed(Exception):
    """One check did not hold; the message says which, and what was seen instead."""


class Client:
    """Collects the agent's text per session and the memory runs it announces."""

    def __init__(self) -> None:
        self.text: dict[str, list[str]] = {}
        self.runs: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if update.session_update == "agent_message_chunk":
            self.text.setdefault(session_id, []).append(update.content.text)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == MEMORY_RUN:
            self.runs.append(params)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/request_permission")


def agent_config(user_config: Path | None, home: Path) -> dict[str, Any]:
    """The agent's config: the user's (if any) with memory on, kept inside `home`."""
    config: dict[str, Any] = {}
    if user_config is not None:
        try:
            loaded = yaml.safe_load(user_config.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise CheckFailed(f"cannot read the config {user_config}: {exc}") from None
        if not isinstance(loaded, dict):
            raise CheckFailed(f"the config {user_config} is not a mapping")
        config = loaded
    memory = section(config, "memory")
    memory.update(enable=True, dir=str(home / "memory"))
    # A real model's memory run may take a while: the turn waits for it (no longer than it
    # takes), so the recall is in the answer.
    memory["wait_seconds"] = 120
    section(config, "sessions")["dir"] = str(home / "sessions")
    return config


def section(config: dict[str, Any], name: str) -> dict[str, Any]:
    """config[name] as a mapping (an empty or missing section becomes one)."""
    value = config.get(name)
    if not isinstance(value, dict):
        value = config[name] = {}
    return value


@contextlib.asynccontextmanager
async def agent(client: Client, home: Path, project: Path) -> AsyncIterator[ClientSideConnection]:
    """`python -m acp_memory acp` on stdio; on exit its input ends, and it drains its memory
    runs (a save in flight finishes) before it exits."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "acp_memory", "acp",
        "--home", str(home), "--cwd", str(project), "--log-level", "warning",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        limit=64 * 1024 * 1024,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    conn = connect_to_agent(client, proc.stdin, proc.stdout)
    try:
        await conn.initialize(protocol_version=1, client_capabilities=CAPABILITIES)
        yield conn
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        await conn.close()


async def ask(conn: ClientSideConnection, client: Client, sid: str, text: str, bound: float) -> str:
    """The agent's whole answer to one prompt, within `bound` seconds."""
    client.text[sid] = []
    try:
        async with asyncio.timeout(bound):
            resp = await conn.prompt(session_id=sid, prompt=[text_block(text)])
    except TimeoutError:
        raise CheckFailed(f"no answer within {bound:g}s to {text!r}") from None
    except RequestError as exc:
        raise CheckFailed(f"the agent refused {text!r}: {exc}") from None
    answer = "".join(client.text[sid])
    if resp.stop_reason != "end_turn":
        raise CheckFailed(f"the turn {text!r} ended with {resp.stop_reason}: {clip(answer)}")
    return answer


def clip(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def notes_with(roots: list[Path], fact: str) -> list[Path]:
    return [
        p
        for root in roots
        if root.is_dir()
        for p in sorted(root.rglob("*"))
        if p.suffix in (".md", ".txt") and fact in p.read_text(encoding="utf-8").lower()
    ]


def check_child_bundles(home: Path, runs: list[dict[str, Any]]) -> int:
    """Every started memory run's child bundle is on disk, a memory child of its session."""
    started = [r for r in runs if r.get("status") == "started"]
    if not started:
        raise CheckFailed("no memory run was announced (_acp_memory/memory_run started)")
    for run in started:
        parent, child = run.get("sessionId"), run.get("childSessionId")
        path = home / "sessions" / str(parent) / "subagents" / str(child) / "session.json"
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CheckFailed(f"memory run {run.get('taskId')}: no child bundle: {exc}") from None
        seen = (record.get("subagentName"), record.get("parentSessionId"))
        if seen != ("memory", parent):
            raise CheckFailed(
                f"{path}: subagentName, parentSessionId are {seen}, not ('memory', {parent!r})"
            )
    return len(started)


async def story(home: Path, project: Path, bound: float) -> None:
    """The four checks; raises CheckFailed at the first that does not hold."""
    name, body, seed_fact = SEED
    (home / "memory").mkdir(parents=True, exist_ok=True)
    (home / "memory" / name).write_text(body, encoding="utf-8")
    roots = [home / "memory", project / "memory"]
    client = Client()
    async with agent(client, home, project) as conn:
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        answer = await ask(conn, client, sid, ASK_SEED, bound)
        if seed_fact not in answer.lower():
            raise CheckFailed(f"the note {name} was not recalled; the answer: {clip(answer)}")
        print(f"ok: a note on disk recalled ({seed_fact!r} in the answer)")
        await ask(conn, client, sid, PERSIST, bound)
    saved = notes_with(roots, NEW_FACT)  # the agent has exited: its memory runs are done
    if not saved:
        raise CheckFailed(f"no note mentions {NEW_FACT!r} after {PERSIST!r}")
    print(f"ok: the new fact saved ({saved[0].relative_to(home.parent)})")
    async with agent(client, home, project) as conn:
        fresh = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        answer = await ask(conn, client, fresh, ASK_NEW, bound)
        if NEW_FACT not in answer.lower():
            raise CheckFailed(f"a fresh session did not recall {NEW_FACT!r}: {clip(answer)}")
    print(f"ok: a fresh session in a new process recalled it ({NEW_FACT!r} in the answer)")
    count = check_child_bundles(home, client.runs)
    print(f"ok: {count} memory child bundles on disk (subagentName 'memory', parentSessionId)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config",
        default=os.environ.get("ACP_MEMORY_E2E_CONFIG") or None,
        help="a config whose models to use (default $ACP_MEMORY_E2E_CONFIG, else none: the "
        "offline model)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the home folder and say where")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per prompt (300)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="acp-e2e-memory-")
    home, project = Path(folder) / "home", Path(folder) / "project"
    project.mkdir()
    home.mkdir()
    try:
        config = agent_config(Path(args.config) if args.config else None, home)
        (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        asyncio.run(story(home, project, args.timeout))
    except CheckFailed as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    except (RequestError, ConnectionError, OSError) as exc:
        print(f"FAIL: the agent: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"home kept: {home}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
