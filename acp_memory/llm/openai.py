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

DEFAULT_API_BASE = "https://api.openai.com/v1"
_FINISH: dict[str, FinishReason] = {
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
            "messages": wire_messages(request.messages),
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
        reader = _ChunkReader(self._endpoint)
        events = self._endpoint.post_sse(self.body(request), last=_is_done)
        async with closing(events):
            async for sse in events:
                if _is_done(sse):
                    break
                chunk = parse_json_event(self._endpoint, sse.data)
                with shape_guard(self._endpoint, "chunk", sse.data):
                    out = reader.feed(chunk)
                for event in out:
                    yield event
            else:
                if reader.reason is None:  # closed without [DONE] or a finish_reason: cut short
                    raise ConnectionDropped(
                        "the stream ended before the answer was complete", provider=self.name
                    )
        for call in reader.calls.take():
            yield ToolCallReady(call)
        reason = _reason(reader.reason or "stop", reader.calls.total)
        yield Finished(reason, reader.usage, reader.void)

    async def _complete(self, request: ChatRequest) -> StreamEvents:
        answer = await self._endpoint.post_json(self.body(request))
        if not isinstance(answer, dict) or not answer.get("choices"):
            raise self._endpoint.error(f"the answer has no choices: {str(answer)[:200]}")
        with shape_guard(self._endpoint, "answer", answer):
            out = _answer_events(answer)
        for event in out:
            yield event


# A tool message carries text alone: the images of a run of tool results follow it as one user
# message, which says where they came from.
TOOL_IMAGES = "The images the tool results above returned:"


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The messages in Chat Completions form, each tool run's images after it."""
    wire: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        wire.append(to_wire(message))
        if message.role == "tool":
            images += [_image_part(p) for p in message.parts if isinstance(p, Image)]
        run_ends = index + 1 == len(messages) or messages[index + 1].role != "tool"
        if images and run_ends:
            wire.append({"role": "user", "content": [{"type": "text", "text": TOOL_IMAGES},
                                                     *images]})
            images = []
    return wire


def _image_part(image: Image) -> dict[str, Any]:
    """An image as a data URL part."""
    url = f"data:{image.mime_type};base64,{image.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def to_wire(message: Message) -> dict[str, Any]:
    """A message in Chat Completions form."""
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content,
        }
    wire: dict[str, Any] = {"role": message.role, "content": _content(message)}
    if message.role == "assistant" and message.tool_calls:
        # Several servers reject null content next to tool calls; "" is accepted everywhere.
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return wire


def _content(message: Message) -> str | list[dict[str, Any]]:
    """The text, or the text and image parts of a message holding images (data URLs)."""
    if not message.parts:
        return message.content
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, str):
            blocks.append({"type": "text", "text": part})
        else:
            blocks.append(_image_part(part))
    return blocks


def _is_done(event: SSEEvent) -> bool:
    return event.data.strip() == "[DONE]"


class _ChunkReader:
    """The state of one streamed answer, fed chunk by chunk."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self.calls = _CallAssembler()
        self.reason: FinishReason | None = None
        self.usage: Usage | None = None
        self.void = ""  # why the usage is void, once a bad block arrived

    def feed(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        """The events one chunk completes; a shape error escapes for the caller to report."""
        if chunk.get("error"):
            raise _stream_error(self._endpoint, chunk["error"])
        if chunk.get("usage") and not self.void:
            self.usage, self.void = _usage(chunk["usage"])
        events: list[StreamEvent] = []
        for choice in json_array(chunk.get("choices")):
            delta = json_object(json_object(choice).get("delta"))
            events += _content_events(delta)
            self.calls.add(json_array(delta.get("tool_calls")))
            finish = json_text(choice.get("finish_reason"))
            if finish:
                self.reason = _FINISH.get(finish, "other")
                events += [ToolCallReady(call) for call in self.calls.take()]
        return events


def _answer_events(answer: dict[str, Any]) -> list[StreamEvent]:
    choice = json_object(json_array(answer["choices"])[0])
    message = json_object(choice.get("message"))
    events = _content_events(message)
    calls = _CallAssembler()
    calls.add(json_array(message.get("tool_calls")))
    events += [ToolCallReady(call) for call in calls.take()]
    reason = _FINISH.get(json_text(choice.get("finish_reason")) or "stop", "other")
    usage, void = _usage(answer["usage"]) if answer.get("usage") else (None, "")
    events.append(Finished(_reason(reason, calls.total), usage, void))
    return events


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


def _reason(reason: FinishReason, calls: int) -> FinishReason:
    # llama.cpp and Ollama have answered "stop" to a message full of tool calls.
    return "tool_calls" if calls and reason == "stop" else reason


def _usage(raw: Any) -> tuple[Usage | None, str]:
    """The usage a block reports, or None and why it is void."""
    # Usage arrives after the answer is complete: a bad block must not cost the answer.
    try:
        block = json_object(raw)
        return Usage(
            input_tokens=token_count(block.get("prompt_tokens")),
            output_tokens=token_count(block.get("completion_tokens")),
            cache_read_tokens=token_count(
                json_object(block.get("prompt_tokens_details")).get("cached_tokens")
            ),
        ), ""
    except (TypeError, ValueError):
        return None, void_usage(raw)


def _stream_error(endpoint: Endpoint, error: Any) -> Exception:
    if isinstance(error, dict):
        code = error.get("code")
        # code is mostly a word ("rate_limit_exceeded"); some servers put the HTTP status there.
        is_status = isinstance(code, int) and not isinstance(code, bool) and 100 <= code < 600
        status = code if is_status else None
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

    def add(self, deltas: list[Any]) -> None:
        for raw in deltas:
            delta = json_object(raw)
            slot = self._slots.setdefault(self._index(delta), _Slot())
            slot.id = json_text(delta.get("id")) or slot.id
            function = json_object(delta.get("function"))
            # The name comes whole (some servers repeat it); the arguments come in pieces.
            slot.name = json_text(function.get("name")) or slot.name
            arguments = function.get("arguments")
            if isinstance(arguments, dict):  # a few servers send an object, not JSON text
                arguments = json.dumps(arguments)
            arguments = json_text(arguments)
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
        if isinstance(index, int) and not isinstance(index, bool):
            return index
        # No index: a new id starts a new call, anything else continues the last one.
        last = max(self._slots, default=-1)
        if last < 0 or (delta.get("id") and delta["id"] != self._slots[last].id):
            return last + 1
        return last
