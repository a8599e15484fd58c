"""The proxy's memory: what it adds to the messages it relays between the editor and the inner
agent. A memory run on every prompt, its report appended to the prompt; `/memory`, `/remember`
and `/forget` answered here; the `acp_memory` option; each inner session's own bundle under
`<sessions dir>/proxy`. Everything else passes as it came.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from acp_memory import __version__
from acp_memory.acp.client import AcpEditor
from acp_memory.acp.handshake import memory_run_updates
from acp_memory.acp.updates import event_update
from acp_memory.build import build_runner
from acp_memory.commands.base import Command, CommandCall
from acp_memory.commands.registry import find_command
from acp_memory.config import Config, Paths
from acp_memory.engine.events import AgentText, TurnEvent
from acp_memory.engine.turn import PlainContext
from acp_memory.hooks.surface import NoHooks
from acp_memory.jsonrpc.errors import RpcError
from acp_memory.llm.registry import ProviderHub
from acp_memory.memory.redact import redact_text
from acp_memory.proxy.editor import EditorLink, replayed_user
from acp_memory.proxy.options import OPTION_ID as OPTION_ID  # the tests' name for it
from acp_memory.proxy.options import PROXY_COMMANDS, ProxyOptions, with_our_commands
from acp_memory.proxy.relay import Forward, Relay, Reply
from acp_memory.proxy.sessions import (
    PROXY_FOLDER,
    Proxied,
    memory_block,
    open_bundle,
    prompt_text,
)
from acp_memory.runtime.carried_run import CarriedRun
from acp_memory.runtime.memory_agent import NO_HITS
from acp_memory.runtime.runner import SessionRunner
from acp_memory.sessions.lock import BundleBusy
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import BundleError

log = logging.getLogger(__name__)

SWITCH = ("on", "off")


@contextlib.asynccontextmanager
async def memory_policy(
    cfg: Config, paths: Paths, hub: ProviderHub, command: Sequence[str]
) -> AsyncIterator[MemoryPolicy]:
    """The policy of one proxy run, its runner running (sessions under `<sessions dir>/proxy`,
    no hooks) until the block ends; `attach` it to the relay before the relay runs."""
    proxy_paths = dataclasses.replace(paths, sessions_dir=paths.sessions_dir / PROXY_FOLDER)
    runner = build_runner(cfg, proxy_paths, hub, hooks=NoHooks(cfg))
    async with runner.running():
        policy = MemoryPolicy(runner, command)
        try:
            yield policy
        finally:
            with anyio.CancelScope(shield=True):
                await policy.aclose()


class MemoryPolicy:
    """The relay's policy with acp-memory's memory on every inner session."""

    def __init__(self, runner: SessionRunner, command: Sequence[str]) -> None:
        self.runner = runner
        self.cfg = runner.cfg
        self.command = list(command)
        self.sessions: dict[str, Proxied] = {}  # by inner session id
        self.options = ProxyOptions(runner, self.sessions)
        self.link = EditorLink(self.cfg, self.inner_id)
        self.editor: AcpEditor | None = None

    def attach(self, relay: Relay) -> None:
        """The relay this policy sends its own requests and notifications through."""
        self.link.relay = relay
        self.editor = AcpEditor(self.link, {})

    async def aclose(self) -> None:
        """The relay ended: every session's record let go."""
        for proxied in list(self.sessions.values()):
            await self._let_go(proxied)

    # -- the relay's hooks ---------------------------------------------------------------

    async def editor_request(self, method: str, params: Any, forward: Forward) -> Reply:
        handler = self._handlers().get(method)
        if handler is None or not isinstance(params, dict):
            return await forward(params)
        return await handler(params, forward)

    async def agent_request(self, method: str, params: Any, forward: Forward) -> Reply:
        return await forward(params)

    def editor_notification(self, method: str, params: Any) -> Any | None:
        if method == "session/cancel" and isinstance(params, dict):
            proxied = self.sessions.get(params.get("sessionId"))  # type: ignore[arg-type]
            for scope in proxied.waits if proxied is not None else ():
                scope.cancel()  # the memory wait ends; the agent gets the cancel too
        return params

    def agent_notification(self, method: str, params: Any) -> Any | None:
        if method != "session/update" or not isinstance(params, dict):
            return params
        update = params.get("update")
        if not isinstance(update, dict):
            return params
        session_id = params.get("sessionId")
        kind = update.get("sessionUpdate")
        if kind == "user_message_chunk":
            return replayed_user(params, update)
        if kind == "agent_message_chunk":
            proxied = self.sessions.get(session_id) if isinstance(session_id, str) else None
            content = update.get("content")
            if proxied is not None and proxied.reply is not None and isinstance(content, dict):
                if content.get("type") == "text" and isinstance(content.get("text"), str):
                    proxied.reply.append(content["text"])
            return params
        if kind == "available_commands_update" and isinstance(update.get("availableCommands"),
                                                              list):
            merged = with_our_commands(update["availableCommands"])
            return {**params, "update": {**update, "availableCommands": merged}}
        if kind == "config_option_update" and isinstance(session_id, str):
            return {**params, "update": self.options.with_option(session_id, update)}
        return params

    def _handlers(self) -> dict[str, Callable[[dict[str, Any], Forward], Any]]:
        return {
            "initialize": self._initialize,
            "session/new": self._new,
            "session/load": self._reopen,
            "session/resume": self._reopen,
            "session/prompt": self._prompt,
            "session/set_config_option": self.options.set_option,
            "session/close": self._close,
            "session/delete": self._delete,
        }

    # -- the handshake -------------------------------------------------------------------

    async def _initialize(self, params: dict[str, Any], forward: Forward) -> Reply:
        capabilities = params.get("clientCapabilities")
        capabilities = capabilities if isinstance(capabilities, dict) else {}
        try:
            self.link.run_form = memory_run_updates(capabilities, self.link.run_form)
        except RpcError as exc:
            return Reply(error={"code": exc.code, "message": exc.message})
        session = capabilities.get("session")
        options = session.get("configOptions") if isinstance(session, dict) else None
        # `{}` advertises them (a bare true, as some clients send, too).
        shown = options.get("boolean") if isinstance(options, dict) else None
        self.options.boolean_shown = isinstance(shown, dict) or shown is True
        if self.link.relay is not None:  # its review questions within what the client offers
            self.editor = AcpEditor(self.link, capabilities)
        reply = await forward(params)
        if reply.error is not None or not isinstance(reply.result, dict):
            return reply
        result = dict(reply.result)
        info = result.get("agentInfo")
        info = dict(info) if isinstance(info, dict) else {"version": __version__}
        inner = info.get("name") or info.get("title") or Path(self.command[0]).name
        info["name"] = f"acp-memory proxy ({inner})"
        result["agentInfo"] = info
        meta = result.get("_meta")
        meta = dict(meta) if isinstance(meta, dict) else {}
        meta["acpMemory"] = {"version": __version__, "memory": self.cfg.memory.enable}
        result["_meta"] = meta
        return Reply(result=result)

    # -- sessions ------------------------------------------------------------------------

    async def _new(self, params: dict[str, Any], forward: Forward) -> Reply:
        reply = await forward(params)
        result = reply.result
        if reply.error is None and isinstance(result, dict):
            inner_id = result.get("sessionId")
            if isinstance(inner_id, str):
                await self._open(inner_id, params.get("cwd"))
                return Reply(result=self.options.with_option(inner_id, result))
        return reply

    async def _reopen(self, params: dict[str, Any], forward: Forward) -> Reply:
        reply = await forward(params)  # the replay's user messages lose their memory blocks
        inner_id = params.get("sessionId")
        if reply.error is None and isinstance(inner_id, str):
            await self._open(inner_id, params.get("cwd"))
            if isinstance(reply.result, dict):
                return Reply(result=self.options.with_option(inner_id, reply.result))
        return reply

    async def _open(self, inner_id: str, cwd: Any) -> None:
        """The inner session's record, made or loaded; a record that cannot be had leaves
        the session without memory, said once in the log."""
        if inner_id in self.sessions:
            return
        folder = cwd if isinstance(cwd, str) else str(self.runner.paths.cwd)
        try:
            session = await anyio.to_thread.run_sync(
                open_bundle, self.runner.store, self.cfg, inner_id, folder, self.command
            )
            await self.runner.session_opened(session, "startup")
        except (BundleError, OSError, ValueError) as exc:
            log.warning("session %s goes without memory: its record under %s cannot be "
                        "used: %s", inner_id, self.runner.store.root, exc)
            return
        self.sessions[inner_id] = Proxied(inner_id, session)

    async def _close(
        self, params: dict[str, Any], forward: Forward, *, reflect: bool = True
    ) -> Reply:
        reply = await forward(params)
        proxied = self.sessions.pop(params.get("sessionId"), None)  # type: ignore[arg-type]
        if proxied is not None:
            self.options.agent.pop(proxied.inner_id, None)
            await self._let_go(proxied, reflect=reflect)
        return reply

    async def _delete(self, params: dict[str, Any], forward: Forward) -> Reply:
        # As the runner's delete_session: what a deleted session said is not learned from.
        return await self._close(params, forward, reflect=False)

    async def _let_go(self, proxied: Proxied, *, reflect: bool = True) -> None:
        self.sessions.pop(proxied.inner_id, None)
        for scope in proxied.waits:
            scope.cancel()
        for run in proxied.carried:
            await run.abandon()
        notify = self.link.notifier(proxied.inner_id)

        async def reflection_update(_: str, update: dict[str, Any]) -> None:
            await notify(update)  # under the inner id, the one the editor knows

        await self.runner.close_session(proxied.session, reflection_update, reflect=reflect)
        proxied.session.close()

    # -- prompts -------------------------------------------------------------------------

    async def _prompt(self, params: dict[str, Any], forward: Forward) -> Reply:
        inner_id, blocks = params.get("sessionId"), params.get("prompt")
        proxied = self.sessions.get(inner_id) if isinstance(inner_id, str) else None
        if proxied is None or not isinstance(blocks, list):
            return await forward(params)
        text = prompt_text(blocks)
        found = find_command(text)
        if found is not None and found[0].name in PROXY_COMMANDS:
            return await self._command(proxied, *found)
        runs: list[CarriedRun] = []
        reports: list[str] = []
        try:
            if self.runner.memory_due(proxied.session):
                cancelled = await self._memory(proxied, text, runs, reports)
                if cancelled:
                    return Reply(result={"stopReason": "cancelled"})
            reports = [r for r in reports if r != NO_HITS]
            sent = {**params, "prompt": [*blocks, memory_block(reports)]} if reports else params
            await self._record(proxied, "user", text)
            proxied.reply = []
            try:
                reply = await forward(sent)
            finally:
                answer, proxied.reply = "".join(proxied.reply or ()), None
                if answer:
                    with anyio.CancelScope(shield=True):
                        await self._record(proxied, "assistant", answer)
            return reply
        finally:
            with anyio.CancelScope(shield=True):
                for run in runs:
                    await run.end_turn()

    async def _memory(
        self, proxied: Proxied, text: str, runs: list[CarriedRun], reports: list[str]
    ) -> bool:
        """The reports a prompt carries: those of earlier runs that came since, then its own
        run's when it came within memory.wait_seconds (runs gets it); True when a
        session/cancel ended the wait. A run that fails costs the prompt nothing."""
        for carried in list(proxied.carried):
            if (report := await carried.late_report()) is not None:
                reports.append(report)
            if not carried.pending:
                proxied.carried.remove(carried)
        session = proxied.session

        async def emit(event: TurnEvent) -> None:
            await self.link.update(proxied.inner_id, event_update(event))

        run = CarriedRun(self.runner.memory, session, text, self.link.notifier(proxied.inner_id),
                         PlainContext(), self.runner.review_questions(session, self.editor, emit))
        runs.append(run)
        scope = anyio.CancelScope()
        proxied.waits.add(scope)
        try:
            with scope:
                await run.begin()
        except Exception:
            log.exception("the memory run of a prompt of %s failed", proxied.inner_id)
        finally:
            proxied.waits.discard(scope)
            if run.pending:  # its report, when it comes, rides on a later prompt
                proxied.carried.append(run)
        if scope.cancel_called:
            return True
        if (report := run.first_report()) is not None:
            reports.append(report)
        return False

    async def _command(self, proxied: Proxied, command: Command, argument: str) -> Reply:
        """A proxy command's reply, as the agent's text of the prompt; never forwarded."""
        session = proxied.session

        async def emit(event: TurnEvent) -> None:
            await self.link.update(proxied.inner_id, event_update(event))

        if command.name == "memory" and argument in SWITCH:
            session.record.memory_enabled = argument == "on"
            text = f"Long-term memory is {argument} in this session."
            try:
                await session.save_record()
            except (BundleBusy, OSError) as exc:
                text = f"Long-term memory is {argument} until the proxy stops: {exc}"
            if (update := self.options.update(proxied.inner_id)) is not None:
                await self.link.update(proxied.inner_id, update)
        else:
            call = CommandCall(self.runner, session, argument, self.editor,
                               self.link.notifier(proxied.inner_id), emit)
            try:
                text = await command.run(call)
            except (BundleBusy, BundleError, OSError) as exc:
                text = f"/{command.name} failed: {exc}"
        await emit(AgentText(text))
        return Reply(result={"stopReason": "end_turn"})

    async def _record(self, proxied: Proxied, role: str, text: str) -> None:
        """A turn's user text or the agent's reply in the record, redacted as a note is."""
        message = TranscriptMessage(role=role, content=redact_text(text))  # type: ignore[arg-type]
        try:
            await proxied.session.append(message)
        except (BundleBusy, OSError) as exc:
            log.warning("cannot record a message of %s: %s", proxied.inner_id, exc)

    def inner_id(self, session_id: str) -> str:
        """The inner id of a proxy bundle's id (what the editor knows), else session_id."""
        for proxied in self.sessions.values():
            if proxied.session.id == session_id:
                return proxied.inner_id
        return session_id

