"""/v1: the agent as an OpenAI-compatible model, so any OpenAI client library can drive it.

The model id is the mode (agent, plan, ask); `metadata.model` picks a configured model. The
last user message is the turn. Without the X-Coddy-Session-Id header the body is the whole
conversation, as OpenAI clients send it: its earlier user and assistant messages start a new
session's transcript (system messages are ignored: the session has its own). With the header
the session's own history is the conversation. The session id comes back in that header.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse, Response, StreamingResponse

from acp_memory.engine.events import TurnEvent
from acp_memory.engine.reply import Reply
from acp_memory.engine.turn import StopReason
from acp_memory.httpserver.agent import HttpAgent
from acp_memory.httpserver.errors import ApiError, error_body
from acp_memory.httpserver.models import (
    ChatChoice,
    ChatCompletion,
    ChatCompletionRequest,
    ChatUsage,
    OpenAIModel,
    OpenAIModelList,
    PromptTokensDetails,
)
from acp_memory.llm.usage import UsageMeter
from acp_memory.modes import MODES
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import Session

# Go's canonical casing, as the reference agent sends it: its clients look the name up in a
# case-sensitive dict (HTTP names are case-insensitive; a request may use any casing).
SESSION_HEADER = "X-Coddy-Session-Id"
# Messages of another agent's tool loop: this agent runs its own tools, never the client's.
TOOL_ROLES = ("tool", "function")
FINISH_REASONS: dict[StopReason, str] = {
    "end_turn": "stop",
    "max_tokens": "length",
    "max_turn_requests": "length",
    "refusal": "content_filter",
    "cancelled": "stop",
}
DONE = b"data: [DONE]\n\n"

log = logging.getLogger(__name__)


def openai_routes(agent: HttpAgent) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"])

    @router.get("/models")
    async def list_models() -> OpenAIModelList:
        """The modes, as model ids."""
        return OpenAIModelList(data=[OpenAIModel(id=mode) for mode in MODES])

    @router.post(
        "/chat/completions",
        response_model=ChatCompletion,
        responses={200: {"content": {"text/event-stream": {}}, "description": "with stream"}},
    )
    async def chat_completions(
        body: ChatCompletionRequest,
        x_coddy_session_id: Annotated[
            str | None, Header(description="continue this session (else a new one)")
        ] = None,
    ) -> Response:
        """One turn; `stream: true` answers with chat.completion.chunk events."""
        text, earlier = _turn(body, new_session=not x_coddy_session_id)
        mode = body.model
        agent.check_mode(mode)
        model = (body.metadata or {}).get("model")
        if model is not None:
            if not isinstance(model, str):
                raise ApiError(400, "metadata.model: must be a model id (a string)")
            # Here, not when the turn starts: a streamed answer has sent its 200 by then.
            agent.check_model(model)
        session = await _session(agent, x_coddy_session_id, mode, model, earlier)
        completion_id = "chatcmpl-" + secrets.token_hex(12)
        created = int(time.time())
        if body.stream:
            base = {"id": completion_id, "object": "chat.completion.chunk", "created": created,
                    "model": mode}
            usage = body.stream_options is not None and body.stream_options.include_usage
            frames = _streamed(agent, session, base, text, model, usage)
            streamed = StreamingResponse(frames, media_type="text/event-stream")
            return _with_session(streamed, session)
        reply = Reply()
        meter = UsageMeter()

        async def collect(event: TurnEvent) -> None:
            reply.add(event)

        with agent.claimed(session) as scope:
            await agent.configure(session, mode, model)
            stop = await agent.run_turn(session, text, scope, collect, meter)
        completion = ChatCompletion(
            id=completion_id,
            created=created,
            model=mode,
            choices=[
                ChatChoice(
                    message={"role": "assistant", "content": reply.text},
                    finish_reason=FINISH_REASONS[stop],
                )
            ],
            usage=_usage(meter),
        )
        return _with_session(JSONResponse(completion.model_dump(mode="json")), session)

    return router


def _with_session(response: Response, session: Session) -> Response:
    """The response, naming its session in SESSION_HEADER's exact casing."""
    # Appended as bytes: Starlette lower-cases the names it is given, and h11 sends these as
    # they are.
    response.raw_headers.append((SESSION_HEADER.encode(), session.id.encode()))
    return response


def _usage(meter: UsageMeter) -> ChatUsage:
    """The turn's tokens in OpenAI's shape: prompt tokens count the cached ones, as its own do."""
    return ChatUsage(
        prompt_tokens=meter.input_tokens,
        completion_tokens=meter.output_tokens,
        total_tokens=meter.input_tokens + meter.output_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=meter.cache_read_tokens),
    )


def _streamed(
    agent: HttpAgent,
    session: Session,
    base: dict[str, Any],
    text: str,
    model: str | None,
    usage: bool,
) -> AsyncIterator[bytes]:
    """Claim the session (409 now, before any byte goes out) and start its turn in the
    agent's task group; the frames it makes, for the response to send (with `usage`, a
    last chunk carries the turn's tokens, as OpenAI's stream_options.include_usage asks)."""
    scope = agent.claim(session)
    # Unbounded: the turn never waits on the client, and its output is bounded.
    send, receive = anyio.create_memory_object_stream[bytes](math.inf)
    stream = _Stream(agent, session, scope, send, base, usage)
    agent.owner.start_soon(stream.run, text, base["model"], model)

    async def frames() -> AsyncIterator[bytes]:
        try:
            async with receive:
                async for frame in receive:
                    yield frame
        finally:
            scope.cancel()  # a client that leaves early cancels its turn

    return frames()


class _Stream:
    """A streamed turn, run in the agent's task group: chunks go out as the turn makes them."""

    def __init__(
        self,
        agent: HttpAgent,
        session: Session,
        scope: anyio.CancelScope,
        send: MemoryObjectSendStream[bytes],
        base: dict[str, Any],
        usage: bool,
    ) -> None:
        self.agent = agent
        self.session = session
        self.scope = scope
        self.send = send
        self.base = base
        self.usage = usage
        self.reply = Reply()
        self.meter = UsageMeter()

    async def run(self, text: str, mode: str, model: str | None) -> None:
        """The turn of a claimed session, released when it ends."""
        agent, session = self.agent, self.session
        async with self.send:
            try:
                try:
                    await self._chunk({"role": "assistant", "content": ""})
                    await agent.configure(session, mode, model)
                    stop = await agent.run_turn(
                        session, text, self.scope, self._on_event, self.meter
                    )
                finally:
                    agent.release(session)
                await self._chunk({}, FINISH_REASONS[stop])
                if self.usage:
                    usage = _usage(self.meter).model_dump()
                    await self._frame({**self.base, "choices": [], "usage": usage})
                await self._send(DONE)
            except ApiError as exc:
                await self._frame(error_body(exc.status, exc.message))
            except Exception as exc:
                # It runs in the agent's task group: an error escaping would stop the server.
                log.exception("session %s: the streamed turn failed", session.id)
                await self._frame(error_body(500, f"the turn failed: {exc}"))

    async def _on_event(self, event: TurnEvent) -> None:
        piece = self.reply.add(event)
        if piece:
            await self._chunk({"content": piece})

    async def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> None:
        await self._frame(
            {**self.base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        )

    async def _frame(self, data: dict[str, Any]) -> None:
        await self._send(f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode())

    async def _send(self, frame: bytes) -> None:
        try:
            await self.send.send(frame)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.scope.cancel()  # the client went away: its turn ends too


def _turn(
    body: ChatCompletionRequest, *, new_session: bool
) -> tuple[str, list[TranscriptMessage]]:
    """The turn's text (the last user message) and, for a new session, the conversation
    before it: its user and assistant messages that hold text."""
    messages = body.messages
    last = next((i for i in reversed(range(len(messages))) if messages[i].role == "user"), None)
    if last is None:
        raise ApiError(400, "messages: no user message; the last one is the turn")
    text = messages[last].text()
    if not text.strip():
        raise ApiError(400, "messages: the last user message has no text")
    if not new_session:
        return text, []
    earlier: list[TranscriptMessage] = []
    for index, message in enumerate(messages):
        if message.role in TOOL_ROLES:
            raise ApiError(
                400,
                f"messages[{index}]: a {message.role!r} message cannot be replayed: this agent "
                "runs its own tools, so a conversation is user and assistant text",
            )
        if index >= last or not message.text().strip():
            continue
        if message.role == "user":
            earlier.append(TranscriptMessage(role="user", content=message.text()))
        elif message.role == "assistant":
            earlier.append(TranscriptMessage(role="assistant", content=message.text()))
    return text, earlier


async def _session(
    agent: HttpAgent,
    session_id: str | None,
    mode: str,
    model: str | None,
    earlier: list[TranscriptMessage],
) -> Session:
    """The session the header names, else a new one in the server's working directory that
    starts from the `earlier` conversation."""
    if session_id:
        return await agent.writable(session_id)
    return await agent.create(str(agent.paths.cwd), mode, model, earlier)
