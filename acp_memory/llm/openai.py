"""OpenAI Chat Completions (and every compatible server) over httpx, streaming or not."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from acp_memory.llm.sse import SSEEvent
from acp_memory.llm.transport import (
    ConnectionDropped,
    Endpoint,
    HttpProvider,
    StreamEvents,
    StreamTimeouts,
    closing,
    parse_json_event,
)
from acp_memory.llm.types import (
    ChatRequest,
    Finished,
    Message,
    ReasoningDelta,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
)

DEFAULT_API_BASE = "https://api.openai.com/v1"
_FINISH: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "refusal",
}


class OpenAIProvider(HttpProvider):
    """A Chat Completions endpoint: api.openai.com, vLLM, llama.cpp, Ollama, OpenRouter, ..."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        name: str = "openai",
        api_base: str = "",
        api_key: str = "",
        timeout_s: float = 600.0,
        timeouts: StreamTimeouts | None = None,
    ) -> None:
        base = (api_base or DEFAULT_API_BASE).rstrip("/")
        # OpenAI's own reasoning models refuse max_tokens; compatible servers mostly know only it.
        self._max_tokens_key = "max_completion_tokens" if "api.openai.com" in base else "max_tokens"
        super().__init__(
            client,
            name=name,
            url=f"{base}/chat/completions",
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            api_key=api_key,
            timeout_s=timeout_s,
            timeouts=timeouts,
        )

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body sent for a request."""
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [to_wire(m) for m in request.messages],
            self._max_tokens_key: request.max_tokens,
            "stream": request.stream,
        }
        if request.stream:
            body["stream_options"] = {"include_usage": True}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
            if request.tool_choice:
                body["tool_choice"] = request.tool_choice
        return body

    async def _stream(self, request: ChatRequest) -> StreamEvents:
        calls = _CallAssembler()
        reason: StopReason | None = None
        usage: Usage | None = None
        events = self._endpoint.post_sse(self.body(request), last=_is_done)
        async with closing(events):
            async for sse in events:
                if _is_done(sse):
                    break
                chunk = parse_json_event(self._endpoint, sse.data)
                if chunk.get("error"):
                    raise _stream_error(self._endpoint, chunk["error"])
                if chunk.get("usage"):
                    usage = _usage(chunk["usage"])
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    for event in _content_events(delta):
                        yield event
                    calls.add(delta.get("tool_calls") or [])
                    if choice.get("finish_reason"):
                        reason = _FINISH.get(choice["finish_reason"], "other")
                        for call in calls.take():
                            yield ToolCallReady(call)
            else:
                if reason is None:  # closed without [DONE] or a finish_reason: the answer is cut
                    raise ConnectionDropped(
                        "the stream ended before the answer was complete", provider=self.name
                    )
        pending = calls.take()
        for call in pending:
            yield ToolCallReady(call)
        yield Finished(_reason(reason or "stop", calls.total), usage)

    async def _complete(self, request: ChatRequest) -> StreamEvents:
        answer = await self._endpoint.post_json(self.body(request))
        if not isinstance(answer, dict) or not answer.get("choices"):
            raise self._endpoint.error(f"the answer has no choices: {str(answer)[:200]}")
        choice = answer["choices"][0]
        message = choice.get("message") or {}
        for event in _content_events(message):
            yield event
        calls = _CallAssembler()
        calls.add(message.get("tool_calls") or [])
        for call in calls.take():
            yield ToolCallReady(call)
        reason = _FINISH.get(choice.get("finish_reason") or "stop", "other")
        usage = _usage(answer["usage"]) if answer.get("usage") else None
        yield Finished(_reason(reason, calls.total), usage)


def to_wire(message: Message) -> dict[str, Any]:
    """A message in Chat Completions form."""
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content,
        }
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        # Several servers reject null content next to tool calls; "" is accepted everywhere.
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return wire


def _is_done(event: SSEEvent) -> bool:
    return event.data.strip() == "[DONE]"


def _content_events(delta: dict[str, Any]) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    # DeepSeek and vLLM say reasoning_content, OpenRouter and Ollama say reasoning.
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        events.append(ReasoningDelta(reasoning))
    for key in ("content", "refusal"):
        text = delta.get(key)
        if isinstance(text, str) and text:
            events.append(TextDelta(text))
    return events


def _reason(reason: StopReason, calls: int) -> StopReason:
    # llama.cpp and Ollama have answered "stop" to a message full of tool calls.
    return "tool_calls" if calls and reason == "stop" else reason


def _usage(raw: dict[str, Any]) -> Usage:
    details = raw.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cache_read_tokens=int(details.get("cached_tokens") or 0),
    )


def _stream_error(endpoint: Endpoint, error: Any) -> Exception:
    if isinstance(error, dict):
        code = error.get("code")
        status = code if isinstance(code, int) else None
        message = str(error.get("message") or error)
    else:
        status, message = None, str(error)
    retryable = status is not None and (status == 429 or status >= 500)
    return endpoint.error(message, status=status, retryable=retryable)


@dataclass
class _Slot:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _CallAssembler:
    """Tool calls put together from deltas: by index, arguments arriving in many pieces."""

    def __init__(self) -> None:
        self._slots: dict[int, _Slot] = {}
        self.total = 0

    def add(self, deltas: list[dict[str, Any]]) -> None:
        for delta in deltas:
            slot = self._slots.setdefault(self._index(delta), _Slot())
            slot.id = delta.get("id") or slot.id
            function = delta.get("function") or {}
            # The name comes whole (some servers repeat it); the arguments come in pieces.
            slot.name = function.get("name") or slot.name
            arguments = function.get("arguments")
            if isinstance(arguments, dict):  # a few servers send an object, not JSON text
                arguments = json.dumps(arguments)
            if arguments:
                slot.arguments.append(arguments)

    def take(self) -> list[ToolCall]:
        calls = [
            ToolCall(s.id or f"call_{uuid.uuid4().hex[:24]}", s.name, "".join(s.arguments) or "{}")
            for _, s in sorted(self._slots.items())
        ]
        self._slots.clear()
        self.total += len(calls)
        return calls

    def _index(self, delta: dict[str, Any]) -> int:
        index = delta.get("index")
        if isinstance(index, int):
            return index
        # No index: a new id starts a new call, anything else continues the last one.
        last = max(self._slots, default=-1)
        if last < 0 or (delta.get("id") and delta["id"] != self._slots[last].id):
            return last + 1
        return last
