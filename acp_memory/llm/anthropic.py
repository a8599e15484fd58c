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
    json_array,
    json_object,
    json_text,
    parse_json_event,
    shape_guard,
    token_count,
    void_usage,
)
from acp_memory.llm.types import (
    ChatRequest,
    Finished,
    FinishReason,
    Image,
    Message,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
)

DEFAULT_API_BASE = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
CACHE_BREAKPOINT = {"type": "ephemeral"}
_STOP: dict[str, FinishReason] = {
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
_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
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
        reader = _EventReader(self._endpoint)
        events = self._endpoint.post_sse(self.body(request), last=_is_stop)
        async with closing(events):
            async for sse in events:
                event = parse_json_event(self._endpoint, sse.data)
                with shape_guard(self._endpoint, "event", sse.data):
                    out = reader.feed(event, sse.event)
                for item in out:
                    yield item
                if reader.done:
                    return
        raise ConnectionDropped("the stream ended before message_stop", provider=self.name)

    async def _complete(self, request: ChatRequest) -> StreamEvents:
        answer = await self._endpoint.post_json(self.body(request))
        if not isinstance(answer, dict):
            raise self._endpoint.error(f"unexpected answer: {str(answer)[:200]}")
        with shape_guard(self._endpoint, "answer", answer):
            out = _answer_events(answer)
        for event in out:
            yield event


def _is_stop(event: SSEEvent) -> bool:
    return event.event == "message_stop"


class _EventReader:
    """The state of one streamed answer, fed event by event."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._blocks: dict[int, _Block] = {}
        self._usage = _UsageCounter()
        self._reason: FinishReason = "other"
        self.done = False

    def feed(self, event: dict[str, Any], name: str) -> list[StreamEvent]:
        """The events one SSE event completes; a shape error escapes for the caller to report."""
        kind = event.get("type") or name
        if kind == "message_start":
            self._usage.update(json_object(event.get("message")).get("usage"))
        elif kind == "content_block_start":
            head = json_object(event.get("content_block"))
            self._blocks[_index(event)] = _Block(
                json_text(head.get("type")), json_text(head.get("id")), json_text(head.get("name"))
            )
        elif kind == "content_block_delta":
            return self._delta(_index(event), json_object(event.get("delta")))
        elif kind == "content_block_stop":
            block = self._blocks.pop(_index(event), _Block(""))
            if block.type == "tool_use":
                return [ToolCallReady(ToolCall(block.id, block.name, "".join(block.json) or "{}"))]
        elif kind == "message_delta":
            stop = json_text(json_object(event.get("delta")).get("stop_reason"))
            if stop:
                self._reason = _STOP.get(stop, "other")
            self._usage.update(event.get("usage"))
        elif kind == "message_stop":
            self.done = True
            return [self._usage.finished(self._reason)]
        elif kind == "error":
            raise _stream_error(self._endpoint, event.get("error"))
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamEvent]:
        dtype = delta.get("type")
        if dtype == "text_delta" and delta.get("text"):
            return [TextDelta(json_text(delta["text"]))]
        if dtype == "thinking_delta" and delta.get("thinking"):
            return [ReasoningDelta(json_text(delta["thinking"]))]
        if dtype == "input_json_delta":
            piece = json_text(delta.get("partial_json"))
            self._blocks.setdefault(index, _Block("tool_use")).json.append(piece)
        return []


def _index(event: dict[str, Any]) -> int:
    index = event.get("index", 0)
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"a block index must be an integer, not {index!r}")
    return index


def _answer_events(answer: dict[str, Any]) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    for raw in json_array(answer.get("content")):
        block = json_object(raw)
        btype = block.get("type")
        if btype == "text" and block.get("text"):
            events.append(TextDelta(json_text(block["text"])))
        elif btype == "thinking" and block.get("thinking"):
            events.append(ReasoningDelta(json_text(block["thinking"])))
        elif btype == "tool_use":
            arguments = json.dumps(block.get("input") or {})
            call = ToolCall(json_text(block.get("id")), json_text(block.get("name")), arguments)
            events.append(ToolCallReady(call))
    usage = _UsageCounter()
    usage.update(answer.get("usage"))
    reason = _STOP.get(json_text(answer.get("stop_reason")), "other")
    events.append(usage.finished(reason))
    return events


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
                # With images (an MCP tool's), its text and image blocks.
                "content": _blocks(message) if message.parts else message.content,
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
    for part in message.parts or (message.content,):
        if isinstance(part, Image):
            source = {"type": "base64", "media_type": part.mime_type, "data": part.data}
            blocks.append({"type": "image", "source": source})
        elif part.strip():  # the API rejects empty and whitespace-only text blocks
            blocks.append({"type": "text", "text": part})
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


def _stream_error(endpoint: Endpoint, error: Any) -> Exception:
    if not isinstance(error, dict):
        error = {"message": error} if error else {}
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
        self.seen = False  # a well-formed block arrived
        self.void = ""  # why the answer's usage is void: one bad block voids it all

    def update(self, raw: Any) -> None:
        # Usage travels beside the answer: a bad block must not cost the answer.
        try:
            block = json_object(raw)
            counts = {k: token_count(block[k]) for k in _USAGE_KEYS if k in block}
        except (TypeError, ValueError):
            self.void = self.void or void_usage(raw)
            return
        self.raw.update(counts)
        self.seen = True

    def finished(self, reason: FinishReason) -> Finished:
        """The answer's Finished event, with its usage or why that is void."""
        return Finished(reason, self.total(), self.void)

    def total(self) -> Usage | None:
        if not self.seen or self.void:
            return None
        read = self.raw.get("cache_read_input_tokens", 0)
        write = self.raw.get("cache_creation_input_tokens", 0)
        return Usage(
            # input_tokens counts the whole prompt, cached parts included, as OpenAI's does.
            input_tokens=self.raw.get("input_tokens", 0) + read + write,
            output_tokens=self.raw.get("output_tokens", 0),
            cache_read_tokens=read,
            cache_write_tokens=write,
        )
