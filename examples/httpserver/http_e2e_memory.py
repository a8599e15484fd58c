"""End to end: long-term memory over the HTTP API of `acp-memory http`.

    .venv/bin/python examples/httpserver/http_e2e_memory.py [--config PATH] [--keep]
        [--timeout SECONDS]

From the repository root, with the README's venv (`.venv/bin/python`: it has the packages
this needs; a bare `python` may not).

Starts `python -m acp_memory http` on a free loopback port in a throw-away home, and checks:
  1. "Remember that ..." sent to a session (POST /coddy/sessions/{id}/prompt) saves the fact:
     the notes tree and the note itself, read over HTTP, hold it;
  2. the run's record is the session's memory task row (GET .../background-tasks): a system
     agent task named "memory" that succeeded, whose child transcript is read-only;
  3. a fresh session, through the OpenAI-compatible /v1/chat/completions, answers with the
     fact: only the disk has it;
  4. SIGTERM stops the server, exit status 0.

It runs on the built-in offline model (no key, no network) unless --config PATH (or
$ACP_MEMORY_E2E_CONFIG) names a config, whose models it then uses: memory is turned on and the
notes and sessions stay in the throw-away home whatever that file says. The checks look for
the facts, never for a model's wording. Exit status 0 when every check passes, 1 with one line
saying which failed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

PERSIST = "Remember that my favourite fruit is the mango."
ASK_NEW = "What is my favourite fruit? Answer in one short sentence."
NEW_FACT = "mango"
LISTENING = re.compile(r"listening on (http://\S+)")


class CheckFailed(Exception):
    """One check did not hold; the message says which, and what was seen instead."""


def server_config(user_config: Path | None, home: Path) -> dict[str, Any]:
    """The server's config: the user's (if any) with memory on and kept inside `home`."""
    config: dict[str, Any] = {}
    if user_config is not None:
        try:
            loaded = yaml.safe_load(user_config.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise CheckFailed(f"cannot read the config {user_config}: {exc}") from None
        if not isinstance(loaded, dict):
            raise CheckFailed(f"the config {user_config} is not a mapping")
        config = loaded
    memory = config.setdefault("memory", {})
    memory.update(enable=True, dir=str(home / "memory"))
    # A real model's run may take a while: the turn waits for it (no longer than it takes).
    memory["wait_seconds"] = max(float(memory.get("wait_seconds", 0)), 120)
    config.setdefault("sessions", {})["dir"] = str(home / "sessions")
    config.pop("httpserver", None)  # loopback, no token, a free port: the flags below
    return config


class Server:
    """`python -m acp_memory http --port 0`; its stderr goes to a file, where the address is."""

    def __init__(self, home: Path, project: Path, bound: float) -> None:
        self.log = home / "server.log"
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "acp_memory", "http", "--home", str(home),
                 "--cwd", str(project), "--port", "0", "--log-level", "warning"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        self.url = self._address(bound)

    def _address(self, bound: float) -> str:
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            match = LISTENING.search(self.log.read_text(errors="replace"))
            if match:
                return match.group(1)
            if self.proc.poll() is not None:
                raise CheckFailed(f"the server exited ({self.proc.returncode}): {self.tail()}")
            time.sleep(0.05)
        raise CheckFailed(f"the server did not start within {bound:g}s: {self.tail()}")

    def tail(self) -> str:
        return clip(self.log.read_text(errors="replace")[-600:], 600)

    def stop(self, bound: float) -> int:
        """SIGTERM, then its exit status (a memory run still going gets its bounded wait)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(bound)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise CheckFailed(f"the server did not stop within {bound:g}s of SIGTERM") from None


def call(client: httpx.Client, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request that must succeed; anything else is a failed check naming the answer."""
    resp = client.request(method, url, **kwargs)
    if resp.status_code != 200:
        raise CheckFailed(f"{method} {url}: {resp.status_code} {clip(resp.text)}")
    return resp


def clip(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def memory_task(client: httpx.Client, sid: str, bound: float) -> dict[str, Any]:
    """The session's memory run, once it has finished (a real model's may outlive the turn)."""
    deadline = time.monotonic() + bound
    while True:
        tasks = call(client, "GET", f"/coddy/sessions/{sid}/background-tasks").json()["tasks"]
        runs = [t for t in tasks if t.get("system") and (t.get("agent") or {}).get("name")
                == "memory"]
        if not runs:
            raise CheckFailed(f"no memory task row for session {sid}: {clip(str(tasks))}")
        if runs[-1]["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return runs[-1]
        time.sleep(0.2)


def saved_notes(client: httpx.Client, sid: str, fact: str) -> list[str]:
    """The notes of both roots, walked over HTTP, whose text holds `fact`."""
    found = []
    for root in ("global", "workspace"):
        folders = [""]
        while folders:
            tree = call(client, "GET", f"/coddy/sessions/{sid}/memory/tree",
                        params={"root": root, "path": folders.pop()}).json()
            for entry in tree["entries"]:
                if entry["type"] == "dir":
                    folders.append(entry["path"])
                    continue
                note = call(client, "GET", f"/coddy/sessions/{sid}/memory/file",
                            params={"root": root, "path": entry["path"]}).json()
                if fact in note["content"].lower():
                    found.append(f"{root}:{entry['path']}")
    return found


def story(server: Server, project: Path, bound: float) -> None:
    """The checks; raises CheckFailed at the first that does not hold."""
    with httpx.Client(base_url=server.url, timeout=bound) as client:
        sid = call(client, "POST", "/coddy/sessions", json={"cwd": str(project)}).json()["id"]
        stop = call(client, "POST", f"/coddy/sessions/{sid}/prompt",
                    json={"text": PERSIST}).json()["stopReason"]
        if stop != "end_turn":
            raise CheckFailed(f"the turn {PERSIST!r} ended with {stop}")
        run = memory_task(client, sid, bound)
        notes = saved_notes(client, sid, NEW_FACT)
        if not notes:
            raise CheckFailed(f"no note mentions {NEW_FACT!r} after {PERSIST!r}")
        print(f"ok: the new fact saved ({notes[0]}, read over HTTP)")
        if run["status"] != "succeeded":
            raise CheckFailed(f"memory task {run['id']} is {run['status']}: {run.get('error')}")
        child = run["agent"]["session_id"]
        transcript = call(client, "GET", f"/coddy/sessions/{child}/messages").json()
        if not (transcript["readOnly"] and transcript["parentSessionId"] == sid):
            raise CheckFailed(f"the run's child session {child} is not a read-only child of {sid}")
        print(f"ok: memory task row {run['id']}: system, agent 'memory', succeeded; its child "
              "transcript read-only")
        answer = call(client, "POST", "/v1/chat/completions", json={
            "model": "agent", "messages": [{"role": "user", "content": ASK_NEW}],
        })
        fresh = answer.headers.get("X-Coddy-Session-ID")
        text = answer.json()["choices"][0]["message"]["content"]
        if fresh == sid or NEW_FACT not in text.lower():
            raise CheckFailed(f"a fresh session did not recall {NEW_FACT!r}: {clip(text)}")
        print(f"ok: a fresh session recalled it over /v1/chat/completions ({NEW_FACT!r})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config",
        default=os.environ.get("ACP_MEMORY_E2E_CONFIG") or None,
        help="a config whose models to use (default $ACP_MEMORY_E2E_CONFIG, else none: the "
        "offline model)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the home folder and say where")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per step (300)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="http-e2e-memory-")
    home, project = Path(folder) / "home", Path(folder) / "project"
    project.mkdir()
    home.mkdir()
    server: Server | None = None
    try:
        config = server_config(Path(args.config) if args.config else None, home)
        (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        server = Server(home, project, min(args.timeout, 60))
        story(server, project, args.timeout)
        status = server.stop(30)
        if status != 0:
            raise CheckFailed(f"after SIGTERM the server exited {status}: {server.tail()}")
        print("ok: SIGTERM stopped the server (exit 0)")
    except CheckFailed as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    except (httpx.HTTPError, OSError) as exc:
        print(f"FAIL: the server: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if server is not None and server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
        if args.keep:
            print(f"home kept: {home}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
