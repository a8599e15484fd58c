"""Long-term memory through print mode, end to end: a fact persisted by one `acp-memory -p`,
then asked for in a fresh session, so the answer can only come from disk.

    .venv/bin/python examples/cli/cli_e2e_memory.py [--home DIR] [--config FILE]

From the repository root, with the README's venv (`.venv/bin/python`: it has the packages
this needs; a bare `python` may not).

It runs in a throw-away home with memory on and, without --config, the built-in offline model
(no network, no key); --config FILE runs it on your models (FILE must set memory.enable: true).
It checks, printing one line per check:
  1. the first turn's memory run saved the fact as a note under <home>/memory, and stderr
     says `memory: saved in ...`;
  2. a new session's answer carries the fact, and stderr says `memory: recalled in ...`;
  3. that recall's run is on disk: its task record and its child session under the
     session's subagents/ folder.
Exit status 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

FACT = "our release train leaves on Fridays"
PERSIST = f"Please remember that {FACT}."
QUESTION = "When does our release train leave?"
ANSWER = "Fridays"
RECALLED = re.compile(r"^memory: recalled in \d+\.\ds \(task (bg_\d+)\)$", re.MULTILINE)
SAVED = re.compile(r"^memory: saved in \d+\.\ds \(task bg_\d+\)$", re.MULTILINE)


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        print(f"{'ok' if ok else 'FAILED'}: {what}" + ("" if ok or not detail else f": {detail}"))
        self.failed += not ok
        return ok


def print_mode(home: Path, cwd: Path, config: Path | None, text: str) -> tuple[int, Any, str]:
    """One `acp-memory -p TEXT --output-format json`: exit code, result object, stderr."""
    command = [sys.executable, "-m", "acp_memory", "--home", str(home), "--cwd", str(cwd)]
    if config is not None:
        command += ["--config", str(config)]
    command += ["-p", text, "--output-format", "json"]
    print(f"$ acp-memory -p {text!r}")
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    for line in done.stderr.splitlines():
        print(f"  stderr: {line}")
    try:
        result = json.loads(done.stdout.splitlines()[-1]) if done.stdout.strip() else None
    except ValueError:
        result = None
    if result is not None:
        print(f"  reply: {result['result']!r}")
    return done.returncode, result, done.stderr


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def run(home: Path, config: Path | None) -> int:
    if config is None and not (home / "config.yaml").exists():
        # The offline model as main agent and as memory child: nothing else to configure.
        # A --home that has its own config keeps it (and runs on its models).
        (home / "config.yaml").write_text("memory: {enable: true}\n", encoding="utf-8")
    cwd = home / "workspace"
    cwd.mkdir(exist_ok=True)
    checks = Checks()

    # 1. Persist: the memory run of the first turn writes the note.
    code, result, stderr = print_mode(home, cwd, config, PERSIST)
    if not checks.check(code == 0 and result is not None, "the persist turn ended", f"exit {code}"):
        return 1
    memory = result["memory"]
    if not checks.check(memory is not None, "memory is on", "set memory.enable: true"):
        return 1
    checks.check(memory["taskStatus"] == "succeeded", "the persist run succeeded", str(memory))
    notes = [p for p in (home / "memory").rglob("*.md") if FACT.lower() in p.read_text().lower()]
    checks.check(bool(notes), "the fact is a note on disk", f"no note under {home / 'memory'}")
    checks.check(bool(SAVED.search(stderr)), "stderr says the fact was saved", stderr.strip())

    # 2. Recall in a fresh session: only the notes on disk know the answer.
    code, result, stderr = print_mode(home, cwd, config, QUESTION)
    if not checks.check(code == 0 and result is not None, "the recall turn ended", f"exit {code}"):
        return 1
    session_id = result["sessionId"]
    checks.check(ANSWER in result["result"], "the answer carries the fact", result["result"])
    line = RECALLED.search(stderr)
    checks.check(line is not None, "stderr says the memory was recalled", stderr.strip())
    if line is None:
        return 1

    # 3. The recall's run on disk: its task record and its child bundle.
    bundle = home / "sessions" / session_id
    task_id = line.group(1)
    record = read_json(bundle / "background" / task_id / "meta.json") or {}
    agent = record.get("agent") or {}
    checks.check(
        record.get("status") == "succeeded" and agent.get("name") == "memory",
        f"task {task_id} is the memory run and succeeded",
        str(record),
    )
    child = bundle / "subagents" / str(agent.get("session_id"))
    child_record = read_json(child / "session.json") or {}
    checks.check(
        child_record.get("subagentName") == "memory"
        and child_record.get("parentSessionId") == session_id
        and child_record.get("subagentTaskId") == task_id,
        f"the child session {child.name} names its parent and its task",
        str(child_record),
    )
    transcript = (read_json(child / "messages.json") or {}).get("messages", [])
    called = {c.get("name") for m in transcript for c in m.get("toolCalls") or []}
    checks.check("memory_search" in called, "the child searched the notes", str(called))
    print(f"{checks.failed} check(s) failed" if checks.failed else "every check passed")
    return 1 if checks.failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--home", help="home folder to use, its config.yaml kept (default: a throw-away one)"
    )
    parser.add_argument("--config", type=Path, help="config file (must set memory.enable)")
    args = parser.parse_args()
    os.environ.pop("ACP_MEMORY_HOME", None)
    if args.home:
        home = Path(args.home)
        home.mkdir(parents=True, exist_ok=True)
        return run(home, args.config)
    with tempfile.TemporaryDirectory(prefix="acp-memory-e2e-") as folder:
        return run(Path(folder), args.config)


if __name__ == "__main__":
    sys.exit(main())
