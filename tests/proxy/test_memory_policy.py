"""The proxy's memory policy, in process: the official SDK client as the editor, the relay and
MemoryPolicy here, the SDK inner agent (tests/fakes/sdk_inner_agent.py) in the same loop, which
logs what it receives; memory runs are real, on the built-in offline model. Every line the
proxy sends the editor passes the ACP wire checker."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from acp import RequestError, connect_to_agent, run_agent, text_block
from acp.schema import ClientCapabilities
from fakes import sdk_inner_agent as inner_fake
from harness import Editor, RecordingClient, _TappedReceive, _TappedSend
from proxykit import INNER_COMMAND, InnerLog, capabilities
from wire_schema import WireChecker, validate_def

from acp_memory import __version__
from acp_memory.config import Config, Paths
from acp_memory.config.models import (
    OFFLINE_MODEL_ID,
    AcpConfig,
    HookCommand,
    HookMatcher,
    HooksConfig,
    MemoryConfig,
    ModelConfig,
    ProviderConfig,
)
from acp_memory.jsonrpc.fdstream import FdReceiveStream, FdSendStream
from acp_memory.llm.registry import ProviderHub
from acp_memory.proxy.policy import OPTION_ID, MemoryPolicy, memory_policy
from acp_memory.proxy.relay import Relay
from acp_memory.proxy.sessions import bundle_id, memory_block, without_block
from acp_memory.sessions.lock import BundleLock
from acp_memory.sessions.store import load_bundle

pytestmark = pytest.mark.anyio

ARGV = list(INNER_COMMAND)
NOTE = "the deploy script is scripts/ship.sh"


@dataclass
class Proxied:
    editor: Editor
    policy: MemoryPolicy
    log: InnerLog

    @property
    def client(self) -> RecordingClient:
        return self.editor.client

    def received(self, method: str) -> list[Any]:
        return self.log.received(method)

    def prompts(self) -> list[list[str]]:
        return self.log.prompts()

    def memory_runs(self) -> list[tuple[str, str]]:
        """(sessionId, status) of each memory_run update the editor got."""
        return [
            (m["params"]["sessionId"], m["params"]["update"]["status"])
            for m in self.editor.checker.sent
            if m.get("method") == "session/update"
            and m["params"]["update"].get("sessionUpdate") == "memory_run"
        ]

    def memory_run_notifications(self) -> list[tuple[str, str]]:
        """(sessionId, status) of each `_acp_memory/memory_run` notification (the ext form)."""
        return [(m["params"]["sessionId"], m["params"]["status"])
                for m in self.editor.checker.sent
                if m.get("method") == "_acp_memory/memory_run"]

    async def open(self, capabilities: ClientCapabilities | None = None) -> str:
        await self.editor.conn.initialize(protocol_version=1, client_capabilities=capabilities)
        new = await self.editor.conn.new_session(cwd=str(self.log.path.parent), mcp_servers=[])
        return new.session_id

    async def prompt(self, session_id: str, text: str) -> str:
        resp = await self.editor.conn.prompt(session_id=session_id, prompt=[text_block(text)])
        return resp.stop_reason


@contextlib.asynccontextmanager
async def proxied(
    cfg: Config, paths: Paths, client: RecordingClient | None = None
) -> AsyncIterator[Proxied]:
    """The proxy's relay and policy in this event loop between the SDK client and the SDK
    inner agent (its log in the project folder)."""
    log = paths.cwd / "inner.jsonl"
    client = client or RecordingClient()
    checker = _Waking(client)
    ours, theirs = socket.socketpair()
    # The inner agent in this event loop, on its own socket: the same SDK agent the
    # end-to-end tests start as a process (tests/proxy/test_proxy_e2e.py), without a process
    # and its imports per test.
    agent_ours, agent_theirs = socket.socketpair()
    logged = os.environ.get(inner_fake.LOG_ENV)
    os.environ[inner_fake.LOG_ENV] = str(log)
    try:
        async with (
            ProviderHub(cfg) as hub,
            memory_policy(cfg, paths, hub, ARGV) as policy,
            anyio.create_task_group() as inner,
        ):
            agent = inner_fake.InnerAgent()
            agent_reader, agent_writer = await asyncio.open_connection(sock=agent_theirs)
            inner.start_soon(functools.partial(
                run_agent, agent, agent_writer, agent_reader,
                observers=[inner_fake.Recorder(agent)]))
            editor_side = (_TappedReceive(ours.fileno(), checker),
                           _TappedSend(ours.fileno(), checker))
            agent_side = (FdReceiveStream(agent_ours.fileno()),
                          FdSendStream(agent_ours.fileno()))
            relay = Relay(editor_side, agent_side, policy,
                          agent_exit=lambda: "the inner agent (in this test's loop) ended")
            policy.attach(relay)
            async with anyio.create_task_group() as tg:
                tg.start_soon(relay.run)
                reader, writer = await asyncio.open_connection(sock=theirs)
                conn = connect_to_agent(client, writer, reader)
                try:
                    yield Proxied(Editor(conn, client, checker), policy, InnerLog(log))
                finally:
                    await conn.close()
                    with contextlib.suppress(OSError):
                        theirs.shutdown(socket.SHUT_WR)  # the editor's input ends: the relay too
                    writer.close()
            inner.cancel_scope.cancel()  # the relay ended: so does the agent
            agent_writer.close()
    finally:
        if logged is None:
            os.environ.pop(inner_fake.LOG_ENV, None)
        else:
            os.environ[inner_fake.LOG_ENV] = logged
        ours.close()
        agent_ours.close()
    checker.assert_clean()


class _Waking(WireChecker):
    """Wakes the client's wait_for on every line the proxy sends (the SDK client surfaces
    no memory_run update)."""

    def __init__(self, client: RecordingClient) -> None:
        super().__init__()
        self.client = client

    def saw_agent_line(self, line: bytes) -> None:
        super().saw_agent_line(line)
        self.client.changed.set()


def _memory(**settings: Any) -> Config:
    cfg = Config()  # no models: the built-in offline model, its runs take milliseconds
    cfg.memory = MemoryConfig(**{"enable": True, "wait_seconds": 30, **settings})
    return cfg


def _asking(form: str) -> ClientCapabilities:
    return ClientCapabilities(field_meta={"memoryRunUpdates": form})


async def _remember(proxy: Proxied, session_id: str) -> None:
    assert await proxy.prompt(session_id, f"/remember {NOTE}") == "end_turn"


# -- initialize ------------------------------------------------------------------------------


async def test_initialize_names_the_proxy_and_the_inner_agent_and_says_memory_is_on(paths):
    async with proxied(_memory(), paths) as proxy:
        init = await proxy.editor.conn.initialize(protocol_version=1)
    assert init.agent_info is not None
    assert init.agent_info.name == "acp-memory proxy (inner-test-agent)"
    assert init.agent_info.version == "1.0"  # the rest of the inner agent's answer as it was
    assert init.field_meta == {"acpMemory": {"version": __version__, "memory": True}}


# -- memory on every prompt ------------------------------------------------------------------


async def test_the_recall_rides_on_the_prompt_as_one_last_block(paths):
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open()
        await _remember(proxy, sid)
        assert await proxy.prompt(sid, "where is the deploy script?") == "end_turn"
        prompts = proxy.prompts()
        reply = proxy.client.text(sid)
    # /remember never reached the agent; the question did, the recall after its own block.
    assert len(prompts) == 1
    user, block = prompts[0]
    assert user == "where is the deploy script?"
    assert block.startswith("<long_term_memory>\n") and block.endswith("\n</long_term_memory>")
    assert "scripts/ship.sh" in block
    assert "where is the deploy script?" in reply  # the inner agent's answer reached the editor


async def test_a_prompt_without_memory_hits_is_forwarded_unchanged(paths):
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open()
        assert await proxy.prompt(sid, "hello there") == "end_turn"
        assert proxy.prompts() == [["hello there"]]


async def test_a_report_after_the_wait_rides_on_the_next_prompt_once(paths):
    # Each answer of the memory model takes a moment: no run can end before its prompt goes.
    cfg = _memory(model="paced/default")
    cfg.providers = [ProviderConfig(name="paced", type="offline", delay_ms=200)]
    cfg.models = [ModelConfig(model="paced/default")]
    async with proxied(cfg, paths) as proxy:
        sid = await proxy.open()
        await _remember(proxy, sid)
        proxy.policy.runner.cfg.memory.wait_seconds = 0  # no prompt waits from here
        await proxy.prompt(sid, "where is the deploy script?")
        (late,) = proxy.policy.sessions[sid].carried
        assert late.task is not None
        with anyio.fail_after(30):
            await late.task.ended.wait()
        await proxy.prompt(sid, "thanks")
        for run in proxy.policy.sessions[sid].carried:  # the second prompt's: no hits
            assert run.task is not None
            with anyio.fail_after(30):
                await run.task.ended.wait()
        await proxy.prompt(sid, "bye")
        prompts = proxy.prompts()
    assert prompts[0] == ["where is the deploy script?"]
    assert prompts[1][0] == "thanks" and "scripts/ship.sh" in prompts[1][1]
    assert prompts[2] == ["bye"]


async def test_a_cancel_during_the_memory_wait_ends_the_prompt_unforwarded(paths):
    # The memory model answers after a minute: the prompt waits for it until the cancel.
    cfg = _memory(model="slow/default")
    cfg.providers = [ProviderConfig(name="slow", type="offline", delay_ms=60_000)]
    cfg.models = [ModelConfig(model="slow/default")]
    async with proxied(cfg, paths) as proxy:
        sid = await proxy.open(_asking("session_update"))
        async with anyio.create_task_group() as tg:
            stops: list[str] = []

            async def prompt() -> None:
                stops.append(await proxy.prompt(sid, "hello"))

            tg.start_soon(prompt)
            await proxy.client.wait_for(lambda: (sid, "started") in proxy.memory_runs())
            await proxy.editor.conn.cancel(session_id=sid)
        # A request forwarded after the cancel: once answered, the agent has read the cancel.
        await proxy.editor.conn.set_config_option(config_id="style", session_id=sid,
                                                  value="terse")
        cancels = proxy.received("session/cancel")
        prompts = proxy.prompts()
        proxy.policy.runner.memory.exit_wait_seconds = 0  # the minute-long run is not waited for
    assert stops == ["cancelled"]
    assert prompts == []  # never forwarded
    assert [c["sessionId"] for c in cancels] == [sid]  # the agent got the cancel too


async def test_the_memory_block_is_taken_out_of_the_replayed_user_messages(paths):
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open()
        await _remember(proxy, sid)
        await proxy.prompt(sid, "where is the deploy script?")
        assert len(proxy.prompts()[0]) == 2  # the agent got the block, and replays it
        await proxy.editor.conn.load_session(cwd=str(paths.cwd), session_id=sid, mcp_servers=[])
        replayed = proxy.client.text(sid, "user_message_chunk")
    assert replayed == "where is the deploy script?"


async def test_the_turns_are_recorded_redacted_in_the_proxy_bundle(paths):
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open()
        await proxy.prompt(sid, "my password=Sup3rSecretValue42 is private")
    assert sid.startswith("inner/")  # untrusted text: never a path
    bundle = load_bundle(paths.sessions_dir / "proxy" / bundle_id(sid))
    assert bundle.record.proxy is not None
    assert bundle.record.proxy.inner_session_id == sid
    assert bundle.record.proxy.command == ARGV
    (user, reply) = bundle.messages
    assert (user.role, reply.role) == ("user", "assistant")
    assert "Sup3rSecretValue42" not in user.content + reply.content
    assert user.content.startswith("my password=") and "[REDACTED" in user.content
    assert reply.content.startswith("my password=")  # the agent's echo, as forwarded


async def test_memory_run_updates_are_off_unless_asked_or_configured(paths):
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open()
        await proxy.prompt(sid, "hello")
        assert proxy.memory_runs() == []
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open(_asking("session_update"))
        await proxy.prompt(sid, "hello")
        assert proxy.memory_runs() == [(sid, "started"), (sid, "finished")]
    cfg = _memory()
    cfg.acp = AcpConfig(memory_run_updates="session_update")  # as a config file sets it
    async with proxied(cfg, paths) as proxy:
        sid = await proxy.open()
        await proxy.prompt(sid, "hello")
        assert proxy.memory_runs() == [(sid, "started"), (sid, "finished")]
    async with proxied(_memory(), paths) as proxy:  # the extension form, under the inner id
        sid = await proxy.open(_asking("ext_notification"))
        await proxy.prompt(sid, "hello")
        assert proxy.memory_runs() == []
        assert proxy.memory_run_notifications() == [(sid, "started"), (sid, "finished")]


async def test_the_review_asks_the_editor_under_the_inner_session(paths):
    client = RecordingClient(permission_answers=["allow_once"])
    async with proxied(_memory(review="ask"), paths, client) as proxy:
        sid = await proxy.open()
        await _remember(proxy, sid)
        asked = client.permission_requests
    assert [(s, t.tool_call_id.startswith("mem_bg_")) for s, t, _ in asked] == [(sid, True)]


async def test_the_proxy_runs_no_hooks(paths, tmp_path):
    marker = tmp_path / "hook-ran"
    cfg = _memory()
    hook = HookMatcher(hooks=[HookCommand(command=f"touch {marker}")])
    cfg.hooks = HooksConfig(SessionStart=[hook], UserPromptSubmit=[hook])
    async with proxied(cfg, paths) as proxy:
        sid = await proxy.open(_asking("session_update"))
        await proxy.prompt(sid, "hello")
        assert (sid, "finished") in proxy.memory_runs()  # the memory child did run
    assert not marker.exists()


# -- commands and options --------------------------------------------------------------------


async def test_the_proxy_commands_shadow_the_agents_in_its_commands_update(paths):
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open()
        await proxy.client.wait_for(lambda: sid in proxy.client.commands)
        commands = {c.name: c.description for c in proxy.client.commands[sid]}
    assert set(commands) == {"review", "memory", "remember", "forget"}
    assert commands["memory"] != "the inner agent's own memory command"


async def test_memory_off_is_answered_by_the_proxy_and_stops_the_runs(paths):
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open(_asking("session_update"))
        assert await proxy.prompt(sid, "/memory off") == "end_turn"
        await proxy.prompt(sid, "hello")
        reply = proxy.client.text(sid)
        prompts = proxy.prompts()
        runs = proxy.memory_runs()
    assert reply.startswith("Long-term memory is off in this session.")
    assert prompts == [["hello"]]  # /memory never reached the agent
    assert runs == []


async def test_the_memory_option_is_added_and_set_by_the_proxy(paths):
    async with proxied(_memory(), paths) as proxy:
        await proxy.editor.conn.initialize(protocol_version=1, client_capabilities=capabilities())
        new = await proxy.editor.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
        sid = new.session_id
        options = await proxy.editor.conn.set_config_option(
            config_id=OPTION_ID, session_id=sid, value=False
        )
        await proxy.prompt(sid, "hello")
        set_calls = proxy.received("session/set_config_option")
        runs = proxy.memory_runs()
    assert [(o.id, o.current_value) for o in new.config_options or []] == [
        ("style", "plain"), (OPTION_ID, True)
    ]
    ids = [o.id for o in options.config_options]
    assert ids == ["style", OPTION_ID]
    assert options.config_options[1].current_value is False
    assert set_calls == []  # never forwarded
    assert runs == []


async def test_the_agents_own_options_keep_the_memory_option_beside_them(paths):
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open(capabilities())
        options = await proxy.editor.conn.set_config_option(
            config_id="style", session_id=sid, value="terse"
        )
        set_calls = proxy.received("session/set_config_option")
    assert [(o.id, o.current_value) for o in options.config_options] == [
        ("style", "terse"), (OPTION_ID, True)
    ]
    assert [c["configId"] for c in set_calls] == ["style"]  # the agent's own: forwarded


async def test_the_memory_option_needs_a_client_that_shows_boolean_options(paths):
    async with proxied(_memory(), paths) as proxy:
        await proxy.editor.conn.initialize(protocol_version=1)
        new = await proxy.editor.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
    assert [o.id for o in new.config_options or []] == ["style"]


# -- close -----------------------------------------------------------------------------------


async def test_closing_a_session_forwards_it_and_lets_the_record_go(paths):
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open()
        await proxy.prompt(sid, "hello")
        record = proxy.policy.sessions[sid].session
        # The test agent has no session/close (unstable): its error comes back as it was,
        # and the proxy's record goes all the same.
        with pytest.raises(RequestError, match="Method not found"):
            await proxy.editor.conn.close_session(session_id=sid)
        closed = proxy.received("session/close")
        assert sid not in proxy.policy.sessions
    assert [c["sessionId"] for c in closed] == [sid]
    assert not record.lock.held


@pytest.mark.parametrize("form", ["session_update", "ext_notification"])
async def test_closing_a_session_tells_the_editor_of_its_reflection_under_the_inner_id(
    paths, form
):
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open(_asking(form))
        for text in ("we use uv for builds", "tests go in tests/unit now", "thanks"):
            assert await proxy.prompt(sid, text) == "end_turn"
        # The turns' runs ended first: still in flight, two of them would count against the
        # session's bound of two and have the reflection skipped.
        pool = proxy.policy.runner.pool_for(proxy.policy.sessions[sid].session)
        for task_id in ("bg_1", "bg_2", "bg_3"):
            task = pool.get(task_id)
            assert task is not None
            with anyio.fail_after(30):
                await task.done.wait()
        with pytest.raises(RequestError, match="Method not found"):
            await proxy.editor.conn.close_session(session_id=sid)
        await proxy.client.wait_for(lambda: len(_runs_of_kind(proxy, "reflect")) == 2)
        turns = _runs_of_kind(proxy, "turn")
        started, finished = _runs_of_kind(proxy, "reflect")
    assert [(s, u["status"]) for s, u in turns] == [(sid, "started"), (sid, "finished")] * 3
    assert (started[0], started[1]["status"]) == (sid, "started")
    assert (finished[0], finished[1]["status"]) == (sid, "finished")
    assert finished[1]["taskId"] == started[1]["taskId"]
    assert finished[1]["taskStatus"] == "succeeded" and finished[1]["delivered"] is False


async def test_deleting_a_session_lets_the_record_go_without_a_reflection(paths):
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open(_asking("session_update"))
        for text in ("we use uv for builds", "tests go in tests/unit now", "thanks"):
            assert await proxy.prompt(sid, text) == "end_turn"
        record = proxy.policy.sessions[sid].session
        # The test agent has no session/delete either: its error comes back as it was. The
        # proxy answers only once the record is let go, so a reflection would have begun.
        with pytest.raises(RequestError, match="Method not found"):
            await proxy.editor.conn._conn.send_request("session/delete", {"sessionId": sid})
        assert sid not in proxy.policy.sessions
        assert _runs_of_kind(proxy, "turn")  # the turns' runs went on as ever
        assert _runs_of_kind(proxy, "reflect") == []
    assert record.record.reflected_through is None
    assert not record.lock.held


def _runs_of_kind(proxy: Proxied, kind: str) -> list[tuple[str, dict[str, Any]]]:
    """(sessionId, update) of each memory_run the editor got, in either form, of that kind."""
    runs: list[tuple[str, dict[str, Any]]] = []
    for m in proxy.editor.checker.sent:
        params = m.get("params") or {}
        if m.get("method") == "_acp_memory/memory_run":
            update = params
        elif (m.get("method") == "session/update"
              and params["update"].get("sessionUpdate") == "memory_run"):
            update = params["update"]
        else:
            continue
        if update["_meta"]["acpMemory"]["kind"] == kind:
            runs.append((params["sessionId"], update))
    return runs


async def test_an_agents_config_option_update_gets_the_memory_option_too(paths):
    style = {"type": "select", "id": "style", "name": "Reply style", "currentValue": "terse",
             "options": [{"value": "terse", "name": "Terse"}]}
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open(capabilities())
        await proxy.prompt(sid, "/memory off")
        sent = proxy.policy.agent_notification("session/update", {
            "sessionId": sid,
            "update": {"sessionUpdate": "config_option_update", "configOptions": [style]},
        })
    validate_def("SessionNotification", sent)
    assert sent["update"]["configOptions"] == [style, {
        "type": "boolean", "id": OPTION_ID, "name": "Long-term memory",
        "description": sent["update"]["configOptions"][1]["description"],
        "currentValue": False,
    }]


def test_a_replayed_message_loses_the_block_joined_to_its_text():
    joined = "where is it?\n\n" + memory_block(["- it is here"])["text"]
    assert without_block(joined) == "where is it?"
    assert without_block("<long_term_memory> typed by the user") == (
        "<long_term_memory> typed by the user"
    )


async def test_memory_runs_on_the_offline_model_unless_memory_model_says(paths):
    cfg = _memory()
    # The agent's model of acp-memory's own sessions: never the proxy's memory model.
    cfg.providers = [ProviderConfig(name="remote", type="openai", api_base="http://127.0.0.1:9")]
    cfg.models = [ModelConfig(model="remote/big")]
    async with proxied(cfg, paths) as proxy:
        sid = await proxy.open()
        await _remember(proxy, sid)
        reply = proxy.client.text(sid)
    bundle = load_bundle(paths.sessions_dir / "proxy" / bundle_id(sid))
    assert bundle.record.selected_model_id == OFFLINE_MODEL_ID
    assert "scripts/ship.sh" in reply  # saved by the offline model, no key, no cost


async def test_a_record_another_process_writes_never_fails_the_prompt(paths):
    async with proxied(_memory(), paths) as proxy:
        sid = await proxy.open()
        record = proxy.policy.sessions[sid].session
        record.close()
        other = BundleLock(record.dir)  # another proxy writing the same inner session
        other.acquire()
        try:
            stop = await proxy.prompt(sid, "hello")
        finally:
            other.release()
        prompts = proxy.prompts()
    assert stop == "end_turn"
    assert prompts == [["hello"]]
