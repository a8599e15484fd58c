"""A small ACP agent on the official Python SDK (agent side): the inner agent of the proxy tests.

Run as `python sdk_inner_agent.py`; it serves ACP on its stdio. Every request and notification
it receives is appended, as it arrived on the wire, to the JSON-lines file `$INNER_AGENT_LOG`
(`{"pid", "method", "params"}` and the `id` of a request): what the proxy forwarded, exactly.

A prompt is echoed back, each of its text blocks as one agent_message_chunk. Cue words in the
prompt's first text block (the user's own: a memory block after it never cues anything):
- `ASK`: session/request_permission, then `permission: <outcome> <optionId>`;
- `READ <path>`: fs/read_text_file, then `read: <content>`;
- `TERM <shell command>`: terminal/create (`sh -c`), wait for exit, output, release, then
  `terminal: <output>exit <code>`;
- `STREAM <n>`: n chunks `chunk <i>`;
- `HANG`: says `hanging` (and `inner-test-agent: hanging in <session>` on stderr), then waits
  for session/cancel and ends the turn `cancelled`;
- `EXIT <code>`: says `inner-test-agent: exiting with <code>` on stderr and exits, mid-turn.
After each session/new or session/load answer it sends an available_commands_update with a
`/memory` command of its own (the proxy must shadow it), and its sessions offer one select
config option, `style`. session/load replays the session's user messages, block by block, as
user_message_chunk (its sessions are kept in `inner_sessions.json` beside the log, so another
process of it, logging beside it, can load them).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import uuid
from pathlib import Path
from typing import Any

from acp import (
    Client,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    SetSessionConfigOptionResponse,
    run_agent,
    update_agent_message_text,
    update_user_message_text,
)
from acp.connection import StreamDirection, StreamEvent
from acp.helpers import update_available_commands
from acp.schema import (
    AgentCapabilities,
    AvailableCommand,
    Implementation,
    PermissionOption,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    ToolCallUpdate,
)

NAME = "inner-test-agent"
OWN_MEMORY_COMMAND = "the inner agent's own memory command"


LOG_ENV = "INNER_AGENT_LOG"


def log_path() -> Path:
    return Path(os.environ[LOG_ENV])


def state_path() -> Path:
    return log_path().with_name("inner_sessions.json")


def log(record: dict[str, Any]) -> None:
    with log_path().open("a", encoding="utf-8") as f:
        f.write(json.dumps({"pid": os.getpid(), **record}) + "\n")


def say(line: str) -> None:
    sys.stderr.write(f"{NAME}: {line}\n")
    sys.stderr.flush()


class InnerAgent:
    def __init__(self) -> None:
        self.conn: Client | None = None
        self.cancelled: dict[str, asyncio.Event] = {}
        self.style: dict[str, str] = {}

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    # -- the sessions, kept on disk ------------------------------------------------------

    @staticmethod
    def _sessions() -> dict[str, list[list[str]]]:
        if not state_path().is_file():
            return {}
        data: dict[str, list[list[str]]] = json.loads(state_path().read_text(encoding="utf-8"))
        return data

    def _record_turn(self, session_id: str, blocks: list[str]) -> None:
        sessions = self._sessions()
        sessions.setdefault(session_id, []).append(blocks)
        state_path().write_text(json.dumps(sessions), encoding="utf-8")

    def _options(self, session_id: str) -> list[Any]:
        return [
            SessionConfigOptionSelect(
                type="select",
                id="style",
                name="Reply style",
                current_value=self.style.get(session_id, "plain"),
                options=[
                    SessionConfigSelectOption(value="plain", name="Plain"),
                    SessionConfigSelectOption(value="terse", name="Terse"),
                ],
            )
        ]

    async def send_commands(self, session_id: str) -> None:
        assert self.conn is not None
        own = AvailableCommand(name="memory", description=OWN_MEMORY_COMMAND)
        review = AvailableCommand(name="review", description="the inner agent reviews the code")
        await self.conn.session_update(session_id, update_available_commands([own, review]))

    # -- the protocol ---------------------------------------------------------------------

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=protocol_version,
            agent_capabilities=AgentCapabilities(load_session=True),
            agent_info=Implementation(name=NAME, title="Inner Test Agent", version="1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        # Untrusted text that is not a path: the proxy must never make it one.
        session_id = f"inner/{uuid.uuid4().hex}"
        sessions = self._sessions()
        sessions[session_id] = []
        state_path().write_text(json.dumps(sessions), encoding="utf-8")
        return NewSessionResponse(session_id=session_id, config_options=self._options(session_id))

    async def load_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> LoadSessionResponse:
        turns = self._sessions().get(session_id)
        if turns is None:
            raise RequestError.resource_not_found(session_id)
        assert self.conn is not None
        for blocks in turns:
            for text in blocks:
                await self.conn.session_update(session_id, update_user_message_text(text))
        return LoadSessionResponse(config_options=self._options(session_id))

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        if config_id != "style" or value not in ("plain", "terse"):
            raise RequestError.invalid_params({"configId": config_id})
        self.style[session_id] = str(value)
        return SetSessionConfigOptionResponse(config_options=self._options(session_id))

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        assert self.conn is not None
        blocks = [b.text for b in prompt if getattr(b, "type", None) == "text"]
        self._record_turn(session_id, blocks)
        self.cancelled[session_id] = asyncio.Event()
        for text in blocks:
            await self._chunk(session_id, text)
        words = blocks[0].split(maxsplit=1) if blocks else []
        cue, rest = (words[0], words[1] if len(words) > 1 else "") if words else ("", "")
        cue = cue.rstrip(".,:;!")  # "ASK. Remember that …": a cue, then a sentence
        if cue == "ASK":
            await self._ask(session_id)
        elif cue == "READ":
            read = await self.conn.read_text_file(session_id=session_id, path=rest.strip())
            await self._chunk(session_id, f"read: {read.content}")
        elif cue == "TERM":
            await self._terminal(session_id, rest)
        elif cue == "STREAM":
            for i in range(int(rest)):
                await self._chunk(session_id, f"chunk {i}\n")
        elif cue == "EXIT":
            say(f"exiting with {int(rest)}")
            os._exit(int(rest))  # at once, the turn unanswered: as an agent that crashes
        elif cue == "HANG":
            say(f"hanging in {session_id}")  # first: the last stderr line once it is seen
            await self._chunk(session_id, "hanging")
            await self.cancelled[session_id].wait()
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    async def _chunk(self, session_id: str, text: str) -> None:
        assert self.conn is not None
        await self.conn.session_update(session_id, update_agent_message_text(text))

    async def _ask(self, session_id: str) -> None:
        assert self.conn is not None
        answer = await self.conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id="inner_call_1", title="Inner tool"),
            options=[
                PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
            ],
        )
        outcome = answer.outcome
        await self._chunk(
            session_id, f"permission: {outcome.outcome} {getattr(outcome, 'option_id', '')}"
        )

    async def _terminal(self, session_id: str, command: str) -> None:
        assert self.conn is not None
        term = await self.conn.create_terminal(
            session_id=session_id, command="sh", args=["-c", command]
        )
        tid = term.terminal_id
        exited = await self.conn.wait_for_terminal_exit(session_id=session_id, terminal_id=tid)
        out = await self.conn.terminal_output(session_id=session_id, terminal_id=tid)
        await self.conn.release_terminal(session_id=session_id, terminal_id=tid)
        await self._chunk(session_id, f"terminal: {out.output}exit {exited.exit_code}")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


class Recorder:
    """Logs what arrives; after a session/new or session/load answer has gone out, has the
    commands update sent (an editor places it only once it knows the session)."""

    def __init__(self, agent: InnerAgent) -> None:
        self.agent = agent
        self.opening: dict[Any, str | None] = {}  # request id -> the loaded session's id

    def __call__(self, event: StreamEvent) -> Any:
        msg = event.message
        if event.direction is StreamDirection.INCOMING:
            if "method" in msg:
                log({k: msg[k] for k in ("id", "method", "params") if k in msg})
                if msg["method"] in ("session/new", "session/load") and "id" in msg:
                    self.opening[msg["id"]] = (msg.get("params") or {}).get("sessionId")
            return None
        if "method" not in msg and msg.get("id") in self.opening and "result" in msg:
            loaded = self.opening.pop(msg["id"])
            session_id = loaded or (msg["result"] or {}).get("sessionId")
            if session_id:
                return self.agent.send_commands(session_id)
        return None


async def main() -> None:
    say(f"started: {shlex.join(sys.argv)}")
    agent = InnerAgent()
    await run_agent(agent, observers=[Recorder(agent)])


if __name__ == "__main__":
    asyncio.run(main())
