"""Hook commands for tests: a small python script, written to the test's tmp_path, that records
the payload it reads on stdin and answers as it is told (stdout, stderr, exit code)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from acp_memory.config.models import HooksConfig

SCRIPT = """\
import json, sys
record, answer = sys.argv[1], json.loads(sys.argv[2])
payload = json.load(sys.stdin)
with open(record, "a", encoding="utf-8") as f:
    f.write(json.dumps(payload) + "\\n")
sys.stdout.write(answer.get("stdout", "").replace("{prompt}", payload.get("prompt", "")))
sys.stderr.write(answer.get("stderr", ""))
sys.exit(answer.get("exit", 0))
"""


class HookKit:
    """Hook commands that all record into one file, in the order they ran."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.script = folder / "hook.py"
        self.script.write_text(SCRIPT)
        self.record = folder / "events.jsonl"

    def command(self, *, stdout: str = "", stderr: str = "", exit: int = 0) -> str:
        """A hook that prints stdout ({prompt} becomes the payload's prompt) and stderr, then
        exits with `exit`."""
        answer = json.dumps({"stdout": stdout, "stderr": stderr, "exit": exit})
        return shlex.join([sys.executable, str(self.script), str(self.record), answer])

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """The payloads the hooks read, optionally of one event only."""
        if not self.record.exists():
            return []
        payloads = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [p for p in payloads if name is None or p["hook_event_name"] == name]


def hooks(**events: list[dict[str, Any]]) -> HooksConfig:
    """A `hooks:` block: hooks(PreToolUse=[group("cmd", matcher="write_file")])."""
    return HooksConfig.model_validate(events)


def group(*commands: str, matcher: str = "", timeout: float = 60) -> dict[str, Any]:
    """One matcher group of hook commands."""
    return {
        "matcher": matcher,
        "hooks": [{"type": "command", "command": c, "timeout": timeout} for c in commands],
    }
