"""`acp-memory demo`: the memory story on the offline model, seen from an editor's side.

The demo starts the agent as an editor does (a subprocess on stdio, the official ACP client)
in a home folder it keeps: a note written beforehand is recalled, a new fact is saved, and a
second agent process recalls that fact in a fresh session, where only the disk can hold it.
That session then asks the agent to forget the fact, and `acp-memory notes undo` brings it
back from the history.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import RequestError, connect_to_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities

from acp_memory.config import Config, ConfigError, Paths, load_config, resolve_paths
from acp_memory.config.loader import expand
from acp_memory.config.models import OFFLINE_MODEL_ID
from acp_memory.stderr import error
from acp_memory.stdout import Stdout

# The first line of the config the demo writes: a home that starts with it is the demo's own.
MARKER = "# written by `acp-memory demo`"
DEMO_CONFIG = f"""{MARKER}: the built-in offline model (no provider), memory on.
# Edit it to run the same story on another model; the demo leaves it as it is from then on.
memory:
  enable: true
  wait_seconds: 10  # the offline memory run takes milliseconds; a real model may need more
"""
SEED_NAME = "servers.md"
SEED_NOTE = "# Servers\n\nThe staging server is called bramble.\n"
SEED_ANSWER = "bramble"
ASK_SEED = "What is the staging server called?"
PERSIST = "Remember that my favourite fruit is the mango."
ASK_NEW = "What is my favourite fruit?"
NEW_ANSWER = "mango"
FORGET = "Forget that my favourite fruit is the mango."
UNDO_TIMEOUT = 60  # seconds for `notes undo`, a bound on a process that takes a moment
# `_acp_memory/memory_run` as the SDK hands it to ext_notification: without the underscore.
MEMORY_RUN = "acp_memory/memory_run"
# The official Python SDK cannot parse a memory_run session update (the default form): the
# demo's client asks at initialize for the extension notification, which it prints.
MEMORY_RUN_FORM = {"memoryRunUpdates": "ext_notification"}


class DemoError(Exception):
    """The story did not happen as told; the message says which part."""


@dataclass
class _PrintingClient:
    """Prints what the agent streams, one readable line per change of speaker, and keeps
    the agent's text of the current prompt."""

    answer: list[str] = field(default_factory=list)
    runs: list[tuple[str, str]] = field(default_factory=list)  # (session id, task id) started
    _open: str | None = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = update.session_update
        if kind == "agent_message_chunk":
            self.answer.append(update.content.text)
            self.say("agent", update.content.text)
        elif kind == "tool_call":
            self.line(f"  [tool] {update.title}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == MEMORY_RUN:
            if params.get("status") == "started":
                self.runs.append((str(params.get("sessionId")), str(params.get("taskId"))))
            self.line(f"  [memory] {describe_memory_run(params)}")

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/request_permission")

    def say(self, who: str, text: str) -> None:
        if self._open != who:
            self.end()
            print(f"{who:>7}: ", end="")
            self._open = who
        print(text.replace("\n", "\n         "), end="", flush=True)

    def line(self, text: str) -> None:
        self.end()
        print(text, flush=True)

    def end(self) -> None:
        if self._open is not None:
            print(flush=True)
            self._open = None


def describe_memory_run(update: dict[str, Any]) -> str:
    """One readable line for a memory_run update (started, finished or skipped)."""
    status = update.get("status")
    task = update.get("taskId", "?")
    if status == "started":
        return f"run {task} started: child session {update.get('childSessionId', '?')}"
    if status == "finished":
        took = f"{update.get('taskStatus', '?')} in {update.get('durationMs', 0)} ms"
        reach = "its report reached this turn" if update.get("delivered") else "not delivered"
        why = f" ({update['reason']})" if update.get("reason") else ""
        return f"run {task} {took}{why}; {reach}"
    if status == "skipped":
        return f"run skipped: {update.get('reason', '?')}"
    return json.dumps(update)


@contextlib.asynccontextmanager
async def spawn_agent(client: Any, args: list[str]) -> AsyncIterator[ClientSideConnection]:
    """Start `python -m acp_memory acp ARGS` on stdio, as an editor starts an agent server.
    (`client` is Any: the SDK's Client protocol lists methods this client never offers.)"""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_memory",
        "acp",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        limit=64 * 1024 * 1024,
    )
    assert proc.stdin is not None and proc.stdout is not None
    conn = connect_to_agent(client, proc.stdin, proc.stdout)
    try:
        await conn.initialize(
            protocol_version=1, client_capabilities=ClientCapabilities(field_meta=MEMORY_RUN_FORM)
        )
        yield conn
    finally:
        proc.stdin.close()  # end of input: the agent finishes and exits by itself
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        finally:
            await conn.close()


async def _ask(conn: ClientSideConnection, client: _PrintingClient, sid: str, text: str) -> str:
    client.answer.clear()
    client.say("you", text)
    client.end()
    await conn.prompt(session_id=sid, prompt=[text_block(text)])
    client.end()
    return "".join(client.answer)


@dataclass(frozen=True)
class _Demo:
    home: Path
    cwd: Path
    cfg: Config
    paths: Paths
    agent_args: list[str]

    @property
    def global_root(self) -> Path:
        from acp_memory.memory.roots import Roots

        return Roots.from_config(self.cfg, self.paths, self.cwd).root_of("global")


async def _story(demo: _Demo, client: _PrintingClient) -> list[str]:
    """The four prompts in two agent processes; the ids of the two sessions."""
    sessions: list[str] = []
    print("\n== an editor starts the agent and opens a session")
    async with spawn_agent(client, demo.agent_args) as conn:
        sid = await _new_session(conn, demo, sessions)
        if SEED_ANSWER not in await _ask(conn, client, sid, ASK_SEED):
            raise DemoError(f"the note global:{SEED_NAME} was not recalled")
        before = _notes(demo.global_root)
        await _ask(conn, client, sid, PERSIST)
    after = _notes(demo.global_root)
    changed = [p for p, text in after.items() if before.get(p) != text]
    if changed:
        print("\n== on disk now, saved by that memory run:")
    else:
        changed = [p for p, text in after.items() if NEW_ANSWER in text]
        if not changed:
            raise DemoError("the new fact was not saved")
        print("\n== on disk already, from an earlier demo (so the run saved nothing new):")
    for path in changed:
        print(f"   global:{path}: {after[path].strip()}")
    print("\n== another agent process, a fresh session: no history, only the notes on disk")
    async with spawn_agent(client, demo.agent_args) as conn:
        sid = await _new_session(conn, demo, sessions)
        if NEW_ANSWER not in await _ask(conn, client, sid, ASK_NEW):
            raise DemoError("the fresh session did not recall the new fact")
        print("\n== the same session asks the agent to forget it")
        await _ask(conn, client, sid, FORGET)
    if any(NEW_ANSWER in text for text in _notes(demo.global_root).values()):
        raise DemoError("the agent did not delete the fact it was asked to forget")
    return sessions


def _undo_forget(demo: _Demo, run: tuple[str, str]) -> None:
    """Show the history's record of what the forgetting run deleted, then bring it back with
    `acp-memory notes undo`, run as a person would run it."""
    from acp_memory.memory.history.summary import change_line
    from acp_memory.memory.roots import Roots
    from acp_memory.memory.store import journal_for

    session_id, task_id = run
    roots = Roots.from_config(demo.cfg, demo.paths, demo.cwd)
    journal = journal_for(demo.cfg, demo.paths)
    try:
        deleted = journal.changes(roots.dirs(), limit=0,
                                  task_id=task_id, session_id=session_id)
        lines = [change_line(change, journal) for change in deleted]
    finally:
        journal.close()
    if not deleted:
        raise DemoError(f"the memory history has no change of the run {task_id}")
    print("\n== the memory history keeps what that run deleted:")
    for line in lines:
        print(f"   {line}")
    print("\n== brought back with `acp-memory notes undo`:")
    for change in deleted:  # newest first, as an undo goes
        argv = [*own_command(), "notes", "undo", change.id, "-y", "--home", str(demo.home)]
        print(f"   $ {' '.join(shlex.quote(word) for word in argv)}")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=UNDO_TIMEOUT,
                              check=False)
        if done.returncode != 0:
            raise DemoError(f"notes undo {change.id} failed: {done.stderr.strip()}")
        print(f"   {done.stdout.strip()}")
        note = Path(change.root, change.path)
        if note.is_file():
            text = note.read_text(encoding="utf-8", errors="replace").strip()
            print(f"   {change.scope}:{change.path}: {text}")


async def _new_session(conn: ClientSideConnection, demo: _Demo, sessions: list[str]) -> str:
    sid = (await conn.new_session(cwd=str(demo.cwd), mcp_servers=[])).session_id
    sessions.append(sid)
    print(f"   session {sid}")
    return sid


def _notes(root: Path) -> dict[str, str]:
    if not root.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(root.rglob("*.md"))
    }


def _print_runs(demo: _Demo, runs: list[tuple[str, str]]) -> None:
    """Each memory run's child bundle, under its session's subagents/, as session.json says."""
    print("\n== the memory runs on disk: each a child session under its session's subagents/")
    shown = ""
    for sid, task in runs:
        bundle = demo.paths.sessions_dir / sid
        if sid != shown:
            print(f"   {bundle}/")
            shown = sid
        for child in sorted((bundle / "subagents").glob("*/session.json")):
            record = json.loads(child.read_text(encoding="utf-8"))
            if record.get("subagentTaskId") != task:
                continue
            print(
                f"     {child.relative_to(bundle)}: "
                f"subagentName {json.dumps(record.get('subagentName'))}, "
                f"subagentTaskId {json.dumps(task)}"
            )


def _prepare(args: argparse.Namespace) -> _Demo:
    """The home (a fresh folder unless --home names one) with the demo's config and its seed
    note; the project folder is --cwd, else `project` beside or inside that home."""
    if args.home:
        home = Path(expand(args.home)).absolute()
        if not _is_demo_home(home):
            raise DemoError(
                f"--home {home} is not empty and not a demo home: the demo writes its own "
                "config and notes there; name a new folder, or leave out --home"
            )
        project = home / "project"
    else:
        folder = Path(tempfile.mkdtemp(prefix="acp-memory-demo-"))
        home, project = folder / "home", folder / "project"
    cwd = Path(expand(args.cwd)).absolute() if args.cwd else project
    cwd.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.yaml"
    if not config.exists():
        config.write_text(DEMO_CONFIG, encoding="utf-8")
    try:
        paths = resolve_paths(home=str(home), config=str(config), cwd=str(cwd))
        cfg = load_config(paths, explicit=True)
    except ConfigError as exc:
        raise DemoError(str(exc)) from None
    paths = resolve_paths(
        home=str(home), config=str(config), sessions_dir=args.sessions_dir, cwd=str(cwd), cfg=cfg
    )
    agent_args = ["--home", str(home), "--cwd", str(cwd)]
    agent_args += ["--log-level", args.log_level or "warning"]
    if args.sessions_dir:
        agent_args += ["--sessions-dir", str(paths.sessions_dir)]
    demo = _Demo(home, cwd, cfg, paths, agent_args)
    seed = demo.global_root / SEED_NAME
    seed.parent.mkdir(parents=True, exist_ok=True)
    seed.write_text(SEED_NOTE, encoding="utf-8")  # as a person would, by hand
    return demo


def _is_demo_home(home: Path) -> bool:
    """A folder the demo may use: missing, empty, or one it set up before."""
    if not home.exists():
        return True
    if home.is_dir() and not any(home.iterdir()):
        return True
    config = home / "config.yaml"
    try:
        return config.read_text(encoding="utf-8").startswith(MARKER)
    except (OSError, UnicodeDecodeError):
        return False


def own_command() -> list[str]:
    """How to start this program again as it was started, PATH or not: the `acp-memory`
    script that runs, else this interpreter with `-m acp_memory`."""
    script = Path(sys.argv[0])
    if script.name == "acp-memory" and script.is_file():
        return [str(script.absolute())]
    return [sys.executable, "-m", "acp_memory"]


def run_demo(args: argparse.Namespace) -> int:
    """Run the story in a home the demo keeps, then say how to look at what it left. A
    reader that leaves early (`demo | head`) misses the rest; the story still ends as usual."""
    with contextlib.redirect_stdout(Stdout(sys.stdout)):
        return _run_demo(args)


def _run_demo(args: argparse.Namespace) -> int:
    if args.config:
        error(
            "demo: --config is not used: the demo writes its own config in its home (edit that "
            "one to try another model)"
        )
        return 2
    try:
        demo = _prepare(args)
    except DemoError as exc:
        error(f"demo: {exc}")
        return 2
    q = shlex.quote
    model = demo.cfg.default_model_id()
    on = "the built-in offline model (no network, no key)" if model == OFFLINE_MODEL_ID else model
    print(f"acp-memory demo: long-term memory, on {on}")
    print(f"   home     {demo.home}  (kept after the demo)")
    print(f"   project  {demo.cwd}")
    print(
        "Each message starts a memory run: a subagent that searches the notes (or saves to\n"
        "them when asked) while the turn waits briefly for its report; [memory] lines are its\n"
        "updates, as the agent sends them."
    )
    print(f"\n== a note written by hand before the agent starts: global:{SEED_NAME}")
    print(f"   {SEED_NOTE.strip().splitlines()[-1]}")
    client = _PrintingClient()
    try:
        sessions = asyncio.run(_story(demo, client))
        _undo_forget(demo, client.runs[-1])
    except DemoError as exc:
        error(f"demo: {exc}")
        return 1
    except (RequestError, ConnectionError) as exc:
        error(f"demo: the agent stopped answering: {exc}")
        return 1
    _print_runs(demo, client.runs)
    print("\n== look at it yourself:")
    command = " ".join(q(word) for word in own_command())
    print(f"   {command} notes list --home {q(str(demo.home))}")
    print(f"   {command} notes log --home {q(str(demo.home))}   # every change, and the undo")
    print(f"   ls {q(str(demo.paths.sessions_dir / sessions[0] / 'subagents'))}")
    saving = [task for sid, task in client.runs if sid == sessions[0]][-1:]
    for task in saving:
        log = demo.paths.sessions_dir / sessions[0] / "background" / task / "output.log"
        print(f"   cat {q(str(log))}   # the log of the run asked to remember")
    return 0
