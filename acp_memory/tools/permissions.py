"""Who says yes to a command, a file write or a path outside the workspace: the config, the
grants remembered in the session bundle, or the user through the editor.

Remembered answers ("Always allow", "Always reject") live in `<bundle>/permission_grants.json`,
so they hold for the session's later turns and after session/load:

    {"version": 1,
     "commands": {"make test": "allow"},           # that exact command line
     "writes": {"/home/me/project": "allow"},        # any write inside that workspace
     "folders": {"/etc": "reject"},                  # any path outside at or below that folder
     "tools": {"mcp__github__create_issue": "allow"}, # that MCP tool, whatever its arguments
     "memory": {"writes": "allow"}}                  # memory.review: ask's "allow for this session"
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import threading
from pathlib import Path
from typing import Any, Literal

import anyio

from acp_memory.atomic import write_json_atomic
from acp_memory.config.models import ToolsConfig
from acp_memory.editor import Editor
from acp_memory.tools.base import PermissionRequest, ToolContext, ToolError, ToolKind, TurnCancelled

log = logging.getLogger(__name__)

GRANTS_FILE = "permission_grants.json"
OPTIONS: list[dict[str, str]] = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
]
_KINDS: dict[str, ToolKind] = {"command": "execute", "write": "edit"}
Decision = Literal["allow", "reject"]
# One read-modify-write of a grants file at a time in this process: gates of background work
# and of the turn may remember answers for the same bundle at once.
_FILE_LOCK = threading.Lock()


# Anything that could make one line more than one simple command (an operator, a
# substitution, a redirection, an escape, a second line), quoted or not: such a line asks.
_SHELL_SYNTAX = frozenset(";&|<>()$`\\\r\n")


def allowlisted(command: str, allowlist: list[str]) -> bool:
    """Whether `command` is one simple command whose words start with an entry's words.

    An entry allows only that command, with any further plain arguments: a line holding
    shell syntax anywhere, or one the lexer cannot split (an unbalanced quote), asks.
    """
    if _SHELL_SYNTAX.intersection(command):
        return False
    words = _words(command)
    if not words:
        return False
    for entry in allowlist:
        prefix = _words(entry)
        if prefix and words[: len(prefix)] == prefix:
            return True
    return False


def _words(line: str) -> list[str] | None:
    try:
        return shlex.split(line)
    except ValueError:
        return None


class PermissionGate:
    """Permissions.ensure for one session: config first, then remembered answers, then the user.

    tools.permission_mode: `ask` asks for commands off the allowlist, MCP tools off theirs
    (tools.mcp_allowlist), writes and paths outside the workspace; `accept_edits` approves
    writes inside the workspace and asks for the rest; `bypass` never asks.
    """

    def __init__(self, tools: ToolsConfig, grants_file: Path, editor: Editor | None) -> None:
        self.tools = tools
        self.grants_file = grants_file
        self.editor = editor

    async def ensure(self, ctx: ToolContext, request: PermissionRequest) -> None:
        mode = self.tools.permission_mode
        if mode == "bypass":
            return
        if request.kind == "command" and allowlisted(request.subject, self.tools.command_allowlist):
            return
        if request.kind == "mcp" and request.subject in self.tools.mcp_allowlist:
            return
        if request.kind == "write" and mode == "accept_edits":
            return
        remembered = await anyio.to_thread.run_sync(
            self._remembered, request, str(ctx.cwd), abandon_on_cancel=True
        )
        if remembered == "allow":
            return
        if remembered == "reject":
            raise ToolError(
                f"permission denied: the user chose to always reject this ({request.title})"
            )
        if self.editor is None:
            allow = (
                f"add {request.subject} to tools.mcp_allowlist"
                if request.kind == "mcp"
                else "add the command to tools.command_allowlist"
            )
            raise ToolError(
                f"{request.title} needs the user's permission and there is no editor to ask; "
                f"tools.permission_mode is {mode!r}: set it to accept_edits (file writes) or "
                f"bypass, or {allow}"
            )
        choice = await self.editor.request_permission(
            ctx.session_id, self._tool_call(ctx, request), OPTIONS
        )
        if choice is None:
            raise TurnCancelled(f"the user cancelled the turn when asked to allow {request.title}")
        if choice in ("allow_always", "reject_always"):
            decision: Decision = "allow" if choice == "allow_always" else "reject"
            # Shielded: the answer is the user's, and must not be lost to a cancel mid-write.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._remember, request, str(ctx.cwd), decision)
        if choice in ("allow_once", "allow_always"):
            return
        if choice in ("reject_once", "reject_always"):
            raise ToolError(f"permission denied: the user rejected this ({request.title})")
        raise ToolError(f"the editor answered the permission request with {choice!r}")

    def _tool_call(self, ctx: ToolContext, request: PermissionRequest) -> dict[str, Any]:
        call: dict[str, Any] = {
            "toolCallId": ctx.call_id,
            "title": request.title,
            "status": "pending",
        }
        if kind := _KINDS.get(request.kind):
            call["kind"] = kind
        if request.kind == "command":
            call["rawInput"] = {"command": request.subject}
        elif request.kind == "mcp":
            call["rawInput"] = request.raw_input if request.raw_input is not None else {}
        else:
            call["locations"] = [{"path": request.subject}]
        return call

    # -- the grants file (worker threads) ---------------------------------------------------

    def _remembered(self, request: PermissionRequest, cwd: str) -> Decision | None:
        grants, _ = self._load()
        if request.kind == "command":
            return _decision(grants["commands"].get(request.subject))
        if request.kind == "mcp":
            return _decision(grants["tools"].get(request.subject))
        if request.kind == "write":
            return _decision(grants["writes"].get(cwd))
        # The nearest remembered folder decides, so "always reject /etc/ssl" inside an
        # allowed /etc still holds.
        subject = Path(request.subject)
        for folder in (subject, *subject.parents):
            if found := _decision(grants["folders"].get(str(folder))):
                return found
        return None

    def _remember(self, request: PermissionRequest, cwd: str, decision: Decision) -> None:
        with _FILE_LOCK:
            grants, readable = self._load()
            if not readable:
                return  # never written over: the user may want what it held back
            if request.kind == "command":
                grants["commands"][request.subject] = decision
            elif request.kind == "mcp":
                grants["tools"][request.subject] = decision
            elif request.kind == "write":
                grants["writes"][cwd] = decision
            else:
                subject = Path(request.subject)
                folder = subject if os.path.isdir(subject) else subject.parent
                grants["folders"][str(folder)] = decision
            try:
                write_json_atomic(self.grants_file, grants)
            except OSError as exc:
                # The answer still holds for this call; only remembering it failed.
                log.warning("cannot remember a permission in %s: %s", self.grants_file, exc)

    def memory_writes_allowed(self) -> bool:
        """Whether the user allowed every memory write of this session (a worker thread)."""
        return self._load()[0]["memory"].get("writes") == "allow"

    def allow_memory_writes(self) -> None:
        """Remember "allow for this session" for the session's memory writes (a worker thread)."""
        with _FILE_LOCK:
            grants, readable = self._load()
            if not readable:
                return  # never written over, as _remember
            grants["memory"]["writes"] = "allow"
            try:
                write_json_atomic(self.grants_file, grants)
            except OSError as exc:
                log.warning("cannot remember a permission in %s: %s", self.grants_file, exc)

    def _load(self) -> tuple[dict[str, Any], bool]:
        """The remembered answers, and whether the file (if any) could be read."""
        grants: dict[str, Any] = {"version": 1, "commands": {}, "writes": {}, "folders": {},
                                  "tools": {}, "memory": {}}
        try:
            data = json.loads(self.grants_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return grants, True
        except (OSError, ValueError) as exc:
            # Nothing is trusted from a damaged file: every call asks again.
            log.warning("ignoring %s: %s", self.grants_file, exc)
            return grants, False
        if not isinstance(data, dict):
            log.warning("ignoring %s: not a JSON object", self.grants_file)
            return grants, False
        for key in ("commands", "writes", "folders", "tools", "memory"):
            value = data.get(key)
            if isinstance(value, dict):
                grants[key] = {str(k): v for k, v in value.items() if _decision(v)}
        return grants, True


def _decision(value: Any) -> Decision | None:
    return value if value in ("allow", "reject") else None
