"""The hook events of one session: their payloads, and what their hooks decided.

A hook's answer, as Claude Code reads it: exit 0 goes on (its stdout, for SessionStart and
UserPromptSubmit, joins the turn context); exit 2 blocks, its stderr the reason; a stdout that
is a JSON object with `"decision": "block"` blocks too, its `reason` the reason. Only
UserPromptSubmit and PreToolUse can be blocked. Any other exit code (a timeout counts as 1) is
logged and ignored.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from acp_memory.hooks.command import HookRun, run_hook
from acp_memory.hooks.table import HookTable
from acp_memory.sessions.store import Session

log = logging.getLogger(__name__)

BLOCK = 2
CAN_BLOCK = frozenset({"UserPromptSubmit", "PreToolUse"})


@dataclass(frozen=True)
class Subagent:
    """The `subagent` block of a payload: a child session, spawned by the model (`agent`) or
    the memory run (`memory`)."""

    name: str
    session_id: str
    kind: Literal["agent", "memory"]

    def dump(self) -> dict[str, str]:
        return {"name": self.name, "session_id": self.session_id, "kind": self.kind}


@dataclass
class Outcome:
    """What the hooks of one event said: a block's line (each blocking hook and its reason),
    and the plain stdout of the rest."""

    blocked: str | None = None
    output: list[str] = field(default_factory=list)


class SessionHooks:
    """Fires the hooks of one session (a child's carry its `subagent` block). For a turn it
    also gathers what SessionStart and UserPromptSubmit printed: the turn context's part."""

    def __init__(
        self, table: HookTable, session: Session, subagent: Subagent | None = None
    ) -> None:
        self.table = table
        self.session_id = session.id
        self.cwd = Path(session.record.cwd)
        self.transcript_path = session.transcript.path
        self.subagent = subagent
        self.context: list[str] = []

    async def session_start(self, source: Literal["startup", "resume"]) -> list[str]:
        """SessionStart; what its hooks printed, for the session's first turn."""
        return (await self.fire("SessionStart", {"source": source})).output

    async def prompt_submitted(self, prompt: str) -> str | None:
        """UserPromptSubmit: `blocked by UserPromptSubmit hook '<command>': <reason>` when a
        hook blocks the prompt, else None (what the hooks printed joins this turn's context)."""
        outcome = await self.fire("UserPromptSubmit", {"prompt": prompt})
        if outcome.blocked is None:
            self.context += outcome.output
        return outcome.blocked

    async def pre_tool(self, tool_name: str, tool_input: Any) -> str | None:
        """PreToolUse: the line naming the hook and its reason when it blocks the call."""
        fields = {"tool_name": tool_name, "tool_input": tool_input}
        return (await self.fire("PreToolUse", fields, tool_name)).blocked

    async def post_tool(self, tool_name: str, tool_input: Any, output: str, is_error: bool) -> None:
        fields = {
            "tool_name": tool_name,
            "tool_input": tool_input,
            "tool_response": {"content": output, "is_error": is_error},
        }
        await self.fire("PostToolUse", fields, tool_name)

    async def stopped(self, stop_reason: str) -> None:
        """Stop: the turn ended by itself (never on cancel, an error or a blocked prompt)."""
        # stop_hook_active as Claude Code sends it: a Stop hook here never makes a turn go on.
        await self.fire("Stop", {"stop_reason": stop_reason, "stop_hook_active": False})

    async def subagent_started(self, child: Subagent, prompt: str) -> None:
        await self.fire("SubagentStart", {"subagent": child.dump(), "prompt": prompt})

    async def subagent_stopped(self, child: Subagent) -> None:
        await self.fire("SubagentStop", {"subagent": child.dump(), "stop_hook_active": False})

    async def fire(
        self, event: str, fields: dict[str, Any], tool_name: str | None = None
    ) -> Outcome:
        """Run the event's hooks at once and read their answers in config order."""
        hooks = self.table.commands(event, tool_name)
        if not hooks:
            return Outcome()
        payload: dict[str, Any] = {
            "session_id": self.session_id,
            "transcript_path": str(self.transcript_path),
            "cwd": str(self.cwd),
            "hook_event_name": event,
        }
        if self.subagent is not None:
            payload["subagent"] = self.subagent.dump()
        payload.update(fields)
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        runs: list[HookRun | None] = [None] * len(hooks)

        async def run(index: int) -> None:
            hook = hooks[index]
            runs[index] = await run_hook(hook.command, data, self.cwd, hook.timeout)

        async with anyio.create_task_group() as tg:
            for index in range(len(hooks)):
                tg.start_soon(run, index)
        outcome = Outcome()
        reasons = [_read(event, r, outcome) for r in runs if r is not None]
        blocked = [r for r in reasons if r is not None]
        if blocked:
            outcome.blocked = "\n".join(blocked)
        return outcome


def _read(event: str, run: HookRun, outcome: Outcome) -> str | None:
    """One hook's answer: a block's reason (None when it did not block); plain stdout of a
    hook that went on is added to outcome.output."""
    shown = f"{event} hook '{run.command}'"  # as typed, quotes and all: never a repr
    decision = _decision(run.stdout) if run.exit_code == 0 else None
    if run.exit_code == BLOCK or decision is not None:
        reason = (run.stderr if run.exit_code == BLOCK else decision or "").strip()
        reason = reason or "no reason given"
        if event in CAN_BLOCK:
            # Named, so that whoever reads it knows which of their hooks to look at.
            return f"blocked by {shown}: {reason}"
        log.warning("%s asked to block, which %s cannot; ignored: %s", shown, event, reason)
        return None
    if run.timed_out:
        log.warning("%s timed out and was killed; ignored", shown)
    elif run.exit_code != 0:
        said = run.stderr.strip().splitlines()
        log.warning(
            "%s exited with %d; ignored%s", shown, run.exit_code, f": {said[0]}" if said else ""
        )
    elif text := run.stdout.strip():
        outcome.output.append(text)
    return None


def _decision(stdout: str) -> str | None:
    """The reason of a `{"decision": "block", "reason": ...}` stdout ("" with no reason),
    None for anything else (plain text, other JSON, broken JSON)."""
    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("decision") != "block":
        return None
    reason = value.get("reason")
    return reason if isinstance(reason, str) else ""
