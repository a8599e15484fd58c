"""Raw JSON-RPC relayed between the editor and the inner agent, with each side's ids remapped.

Methods are not looked up: whatever either side sends passes on as it came (errors with their
code, message and data), unless the policy changes it. Each inbound request runs in a task of
its own (a prompt waits long); notifications and answers are handled in the reading loop, in
order, and every message to one side goes through that side's one ordered outbox, so an
agent's `session/update` always reaches the editor before the answer of the prompt it belongs
to.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, TaskGroup

from acp_memory.jsonrpc.cancel import CANCEL_REQUEST
from acp_memory.jsonrpc.errors import INTERNAL_ERROR, REQUEST_CANCELLED
from acp_memory.jsonrpc.framing import DEFAULT_MAX_LINE_BYTES, OversizedLine, input_lines
from acp_memory.jsonrpc.messages import readable_id
from acp_memory.jsonrpc.outbox import Outbox

log = logging.getLogger(__name__)

# Once the agent is gone, the editor's requests in flight get this long to be answered with
# its exit line, and once the relay ends, what is queued for the editor this long to go out.
DRAIN_SECONDS = 5.0


class Side(enum.Enum):
    """One end of the relay."""

    EDITOR = "editor"
    AGENT = "agent"


@dataclass
class Reply:
    """What a request got: exactly one of result / error (`{"code", "message", "data"?}` as
    received)."""

    result: Any = None
    error: dict[str, Any] | None = None


# Sends a request's params (maybe changed) on to the other side and awaits its reply.
Forward = Callable[[Any], Awaitable[Reply]]


class Policy(Protocol):
    """What the relay does with each message on its way; `Passthrough` changes nothing.

    A notification hook returns the params to send on, or None to drop the notification (a
    notification that came without params goes on as it came when the hook returns None)."""

    async def editor_request(self, method: str, params: Any, forward: Forward) -> Reply: ...

    async def agent_request(self, method: str, params: Any, forward: Forward) -> Reply: ...

    def editor_notification(self, method: str, params: Any) -> Any | None: ...

    def agent_notification(self, method: str, params: Any) -> Any | None: ...


class Passthrough:
    """Every message passes as it came."""

    async def editor_request(self, method: str, params: Any, forward: Forward) -> Reply:
        """The request forwarded as it came."""
        return await forward(params)

    async def agent_request(self, method: str, params: Any, forward: Forward) -> Reply:
        """The request forwarded as it came."""
        return await forward(params)

    def editor_notification(self, method: str, params: Any) -> Any | None:
        """The notification forwarded as it came."""
        return params

    def agent_notification(self, method: str, params: Any) -> Any | None:
        """The notification forwarded as it came."""
        return params


class _Waiter:
    """Our request to one side, until its answer comes."""

    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.reply: Reply | None = None

    def resolve(self, reply: Reply) -> None:
        if self.reply is None:
            self.reply = reply
            self.done.set()


class _Inbound:
    """A request a side sent us, while it runs: its scope, and its id on the other side once
    forwarded (what that side's `$/cancel_request` is remapped to)."""

    __slots__ = ("forwarded", "scope")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.forwarded: int | None = None


class _Peer:
    """One side's wire: its input, its ordered outbox, our requests to it and its to us."""

    def __init__(self, side: Side, receive: ByteReceiveStream, send: ByteSendStream) -> None:
        self.side = side
        self.receive = receive
        self.outbox = Outbox(send)
        self.last_id = 0  # ids of everything we send it, forwarded or our own: never reused
        self.pending: dict[int, _Waiter] = {}
        self.inbound: dict[Any, _Inbound] = {}
        self.in_flight = 0
        self.settled = anyio.Event()
        self.gone: Reply | None = None  # once its output ended: the answer to all sent to it


class Relay:
    """Relays one editor and one inner agent until either's output ends."""

    def __init__(
        self,
        editor: tuple[ByteReceiveStream, ByteSendStream],
        agent: tuple[ByteReceiveStream, ByteSendStream],
        policy: Policy,
        *,
        agent_exit: Callable[[], Awaitable[str]] | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        drain_seconds: float = DRAIN_SECONDS,
    ) -> None:
        """`agent_exit` says how the agent ended, once its output did (the error every
        request pending at it gets)."""
        self._editor = _Peer(Side.EDITOR, *editor)
        self._agent = _Peer(Side.AGENT, *agent)
        self.policy = policy
        self._agent_exit = agent_exit or _agent_closed
        self._max_line = max_line_bytes
        self._drain_seconds = drain_seconds
        self._tg: TaskGroup | None = None
        self.ended_by: Side | None = None  # whose output ending ended the relay

    async def run(self) -> None:
        """Relay until the editor's input ends or the agent's output ends (then every request
        pending at the agent is answered with how it ended)."""
        async with anyio.create_task_group() as writers:
            writers.start_soon(self._editor.outbox.run)
            writers.start_soon(self._agent.outbox.run)
            try:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    tg.start_soon(self._serve_editor, tg.cancel_scope)
                    tg.start_soon(self._serve_agent, tg.cancel_scope)
            finally:
                self._tg = None
                for waiter in [*self._editor.pending.values(), *self._agent.pending.values()]:
                    waiter.resolve(Reply(error=_error("the relay ended")))
                with anyio.CancelScope(shield=True):
                    await self._editor.outbox.aclose()
                    await self._agent.outbox.aclose()
                # What is queued goes out, unless a side stopped reading: then we leave.
                writers.cancel_scope.deadline = anyio.current_time() + self._drain_seconds

    async def request(self, side: Side, method: str, params: Any) -> Reply:
        """Our own request to `side` (ids from the same counter as the forwarded ones)."""
        return await self._send_request(self._peer(side), method, params, None)

    async def notify(self, side: Side, method: str, params: Any) -> None:
        """Our own notification to `side`, in order with what is relayed to it."""
        await self._peer(side).outbox.post({"jsonrpc": "2.0", "method": method, "params": params})

    def _peer(self, side: Side) -> _Peer:
        return self._editor if side is Side.EDITOR else self._agent

    def _other(self, peer: _Peer) -> _Peer:
        return self._agent if peer is self._editor else self._editor

    async def _serve_editor(self, scope: anyio.CancelScope) -> None:
        await self._read(self._editor)
        if self.ended_by is None:
            self.ended_by = Side.EDITOR
            scope.cancel()

    async def _serve_agent(self, scope: anyio.CancelScope) -> None:
        await self._read(self._agent)
        if self.ended_by is not None:
            return
        self.ended_by = Side.AGENT
        line = await self._agent_exit()
        log.warning("%s", line)
        gone = Reply(error=_error(line))
        self._agent.gone = gone
        for waiter in list(self._agent.pending.values()):
            waiter.resolve(gone)
        # A request the policy still holds (a memory wait) would only reach a gone agent.
        for inbound in list(self._editor.inbound.values()):
            if inbound.forwarded is None:
                inbound.scope.cancel()
        # The editor's requests in flight get the exit line, then the relay ends.
        with anyio.move_on_after(self._drain_seconds):
            while self._editor.in_flight:
                self._editor.settled = anyio.Event()
                await self._editor.settled.wait()
        scope.cancel()

    async def _read(self, peer: _Peer) -> None:
        lines = input_lines(peer.receive, self._max_line, f"the {peer.side.value}'s output")
        async with contextlib.aclosing(lines):
            async for line in lines:
                if isinstance(line, OversizedLine):
                    _dropped(peer, f"a line of {line.size} bytes exceeds {self._max_line}")
                    continue
                if not line.strip():
                    continue
                try:
                    message = json.loads(line)
                except ValueError as exc:  # invalid UTF-8 included
                    _dropped(peer, f"not JSON ({exc})")
                    continue
                if isinstance(message, list):  # a batch: its members, one by one
                    for member in message:
                        await self._on_message(peer, member)
                else:
                    await self._on_message(peer, message)

    async def _on_message(self, peer: _Peer, message: Any) -> None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            _dropped(peer, "not a JSON-RPC message")
            return
        method = message.get("method")
        if method is None and "id" in message and ("result" in message or "error" in message):
            self._on_answer(peer, message)
        elif not isinstance(method, str):
            _dropped(peer, "not a JSON-RPC message")
        elif "id" not in message:
            await self._on_notification(peer, method, message)
        elif message["id"] is not None and readable_id(message) is None:
            _dropped(peer, f"{method}: an id that is not a string or a number")
        elif message["id"] in peer.inbound:
            _dropped(peer, f"{method}: the id of a request still running")
        else:
            assert self._tg is not None
            inbound = peer.inbound[message["id"]] = _Inbound()
            peer.in_flight += 1
            self._tg.start_soon(self._on_request, peer, message, inbound)

    def _on_answer(self, peer: _Peer, message: dict[str, Any]) -> None:
        msg_id = message["id"]
        waiter = peer.pending.pop(msg_id, None) if isinstance(msg_id, int) else None
        if waiter is None:
            _dropped(peer, f"an answer to no request of ours (id {msg_id!r})")
            return
        if "error" in message:
            waiter.resolve(Reply(error=message["error"]))
        else:
            waiter.resolve(Reply(result=message["result"]))

    async def _on_notification(self, peer: _Peer, method: str, message: dict[str, Any]) -> None:
        params = message.get("params")
        hook = (
            self.policy.editor_notification
            if peer is self._editor
            else self.policy.agent_notification
        )
        try:
            sent = hook(method, params)
        except Exception:
            log.exception(
                "the proxy failed on a %s notification from the %s; passed as it came",
                method,
                peer.side.value,
            )
            sent = params
        if sent is None and params is not None:
            return
        if method == CANCEL_REQUEST and isinstance(sent, dict):
            named = sent.get("requestId")
            inbound = peer.inbound.get(named) if _hashable(named) else None
            if inbound is not None and inbound.forwarded is None:
                # The policy holds it (a memory wait): nothing of it reached the other side.
                inbound.scope.cancel()
                return
            if inbound is not None:
                sent = {**sent, "requestId": inbound.forwarded}
        out = message if sent is params else {"jsonrpc": "2.0", "method": method, "params": sent}
        await self._other(peer).outbox.post(out)

    async def _on_request(self, peer: _Peer, message: dict[str, Any], inbound: _Inbound) -> None:
        msg_id, method = message["id"], message["method"]
        other = self._other(peer)

        async def forward(params: Any) -> Reply:
            return await self._send_request(other, method, params, inbound)

        call = self.policy.editor_request if peer is self._editor else self.policy.agent_request
        reply: Reply | None = None
        try:
            with inbound.scope:
                try:
                    reply = await call(method, message.get("params"), forward)
                except Exception:
                    log.exception(
                        "the proxy failed to relay %s from the %s", method, peer.side.value
                    )
                    reply = Reply(error=_error(f"the proxy failed to relay {method}"))
            if reply is None:  # stopped before it was forwarded: by its $/cancel_request,
                # or by the other side's end
                reply = other.gone or Reply(
                    error={"code": REQUEST_CANCELLED, "message": "Request cancelled"}
                )
            await peer.outbox.post(_answer(msg_id, reply))
        finally:
            del peer.inbound[msg_id]
            peer.in_flight -= 1
            if not peer.in_flight:
                peer.settled.set()

    async def _send_request(
        self, target: _Peer, method: str, params: Any, inbound: _Inbound | None
    ) -> Reply:
        if target.gone is not None:
            return target.gone
        target.last_id += 1
        our_id = target.last_id
        waiter = target.pending[our_id] = _Waiter()
        if inbound is not None:
            inbound.forwarded = our_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": our_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await target.outbox.post(message)
            await waiter.done.wait()
        finally:
            target.pending.pop(our_id, None)
        assert waiter.reply is not None
        return waiter.reply


def _answer(msg_id: Any, reply: Reply) -> dict[str, Any]:
    if reply.error is not None:
        return {"jsonrpc": "2.0", "id": msg_id, "error": reply.error}
    return {"jsonrpc": "2.0", "id": msg_id, "result": reply.result}


def _error(message: str) -> dict[str, Any]:
    return {"code": INTERNAL_ERROR, "message": message}


def _hashable(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float)


def _dropped(peer: _Peer, why: str) -> None:
    # Never forwarded: a line without a readable id cannot be remapped.
    log.warning("dropped a line from the %s: %s", peer.side.value, why)


async def _agent_closed() -> str:
    return "the inner agent closed its output"
