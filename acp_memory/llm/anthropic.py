"""Anthropic's Messages API over httpx: streaming events, tool_use blocks, cache breakpoints."""

from __future__ import annotations

import json
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
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
)

DEFAULT_API_BASE = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
CACHE_BREAKPOINT = {"type": "ephemeral"}
_STOP: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
}
# Error types of Anthropic's error events, as the HTTP statuses they stand for.
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}


class AnthropicProvider(HttpProvider):
    """Claude models through POST /v1/messages."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        name: str = "anthropic",
        api_base: str = "",
        api_key: str = "",
        timeout_s: float = 600.0,
        timeouts: StreamTimeouts | None = None,
    ) -> None:
        base = (api_base or DEFAULT_API_BASE).rstrip("/").removesuffix("/v1")
        headers = {"anthropic-version": API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        super().__init__(
            client,
            name=name,
            url=f"{base}/v1/messages",
            headers=headers,
            api_key=api_key,
            timeout_s=timeout_s,
            timeouts=timeouts,
        )

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body sent for a request, cache breakpoints included."""
        system, messages = to_wire(request.messages, request.cache_prefix_len)
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
            "stream": request.stream,
        }
        if system:
            body["system"] = system
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
            if request.tool_choice:
                body["tool_choice"] = _TOOL_CHOICE[request.tool_choice]
        return body

    async def _stream(self, request: ChatRequest) -> StreamEvents:
        blocks: dict[int, _Block] = {}
        usage = _UsageCounter()
        reason: StopReason = "other"
        events = self._endpoint.post_sse(self.body(request), last=_is_stop)
        async with closing(events):
            async for sse in events:
                event = parse_json_event(self._endpoint, sse.data)
                kind = event.get("type") or sse.event
                if kind == "message_start":
                    usage.update((event.get("message") or {}).get("usage") or {})
                elif kind == "content_block_start":
                    block = event.get("content_block") or {}
                    blocks[event.get("index", 0)] = _Block(
                        block.get("type", ""), block.get("id", ""), block.get("name", "")
                    )
                elif kind == "content_block_delta":
                    delta = event.get("delta") or {}
                    dtype = delta.get("type")
                    if dtype == "text_delta" and delta.get("text"):
                        yield TextDelta(delta["text"])
                    elif dtype == "thinking_delta" and delta.get("thinking"):
                        yield ReasoningDelta(delta["thinking"])
                    elif dtype == "input_json_delta":
                        blocks.setdefault(event.get("index", 0), _Block("tool_use")).json.append(
                            delta.get("partial_json") or ""
                        )
                elif kind == "content_block_stop":
                    block = blocks.pop(event.get("index", 0), _Block(""))
                    if block.type == "tool_use":
                        yield ToolCallReady(
                            ToolCall(block.id, block.name, "".join(block.json) or "{}")
                        )
                elif kind == "message_delta":
                    stop = (event.get("delta") or {}).get("stop_reason")
                    if stop:
                        reason = _STOP.get(stop, "other")
                    usage.update(event.get("usage") or {})
                elif kind == "message_stop":
                    yield Finished(reason, usage.total())
                    return
                elif kind == "error":
                    raise _stream_error(self._endpoint, event.get("error") or {})
        raise ConnectionDropped("the stream ended before message_stop", provider=self.name)

    async def _complete(self, request: ChatRequest) -> StreamEvents:
        answer = await self._endpoint.post_json(self.body(request))
        if not isinstance(answer, dict):
            raise self._endpoint.error(f"unexpected answer: {str(answer)[:200]}")
        for block in answer.get("content") or []:
            btype = block.get("type")
            if btype == "text" and block.get("text"):
                yield TextDelta(block["text"])
            elif btype == "thinking" and block.get("thinking"):
                yield ReasoningDelta(block["thinking"])
            elif btype == "tool_use":
                arguments = json.dumps(block.get("input") or {})
                yield ToolCallReady(ToolCall(block.get("id", ""), block.get("name", ""), arguments))
        usage = _UsageCounter()
        usage.update(answer.get("usage") or {})
        yield Finished(_STOP.get(answer.get("stop_reason") or "", "other"), usage.total())


def _is_stop(event: SSEEvent) -> bool:
    return event.event == "message_stop"


def to_wire(
    messages: list[Message], cache_prefix_len: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """System blocks and Messages API turns, with cache breakpoints on the stable prefix."""
    system: list[dict[str, Any]] = []
    wire: list[dict[str, Any]] = []
    prefix_end: dict[str, Any] | None = None  # the last block of the stable prefix
    for index, message in enumerate(messages):
        block: dict[str, Any] | None
        if message.role == "system":
            system.append({"type": "text", "text": message.content})
            block = None  # the system breakpoint below already covers it
        elif message.role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.content,
            }
            last = wire[-1] if wire else None
            if last and last["role"] == "user" and last["content"][0]["type"] == "tool_result":
                last["content"].append(block)  # results of one assistant message travel together
            else:
                wire.append({"role": "user", "content": [block]})
        else:
            content = _blocks(message)
            if not content:  # the API rejects empty turns; an empty assistant step says nothing
                block = None
            else:
                wire.append({"role": message.role, "content": content})
                block = content[-1]
        if index == cache_prefix_len - 1:
            prefix_end = block
    if system:
        system[-1]["cache_control"] = dict(CACHE_BREAKPOINT)
    if prefix_end is not None:
        prefix_end["cache_control"] = dict(CACHE_BREAKPOINT)
    return system, wire


def _blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.content.strip():  # the API rejects empty and whitespace-only text blocks
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call)})
    return blocks


def _input(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        value = None
    # tool_use input must be an object; keep what the model wrote so it can see its mistake.
    return value if isinstance(value, dict) else {"_raw_arguments": call.arguments}


def _stream_error(endpoint: Endpoint, error: dict[str, Any]) -> Exception:
    status = _ERROR_STATUS.get(str(error.get("type")))
    message = str(error.get("message") or error.get("type") or "error event")
    retryable = status is not None and (status == 429 or status >= 500)
    return endpoint.error(message, status=status, retryable=retryable)


@dataclass
class _Block:
    type: str
    id: str = ""
    name: str = ""
    json: list[str] = field(default_factory=list)


class _UsageCounter:
    """Anthropic reports input at message_start and cumulative output at message_delta."""

    def __init__(self) -> None:
        self.raw: dict[str, int] = {}

    def update(self, raw: dict[str, Any]) -> None:
        self.raw.update({k: int(v) for k, v in raw.items() if isinstance(v, int)})

    def total(self) -> Usage:
        read = self.raw.get("cache_read_input_tokens", 0)
        write = self.raw.get("cache_creation_input_tokens", 0)
        return Usage(
            # input_tokens counts the whole prompt, cached parts included, as OpenAI's does.
            input_tokens=self.raw.get("input_tokens", 0) + read + write,
            output_tokens=self.raw.get("output_tokens", 0),
            cache_read_tokens=read,
            cache_write_tokens=write,
        )
