"""The built-in offline model: deterministic, no network, no key.

It answers from what it received and says plainly what it is. It also drives tools on request,
so the whole loop can be seen without a provider: a line `/tool NAME {"arg": "value"}` in the
user's message makes it call that tool (arguments default to {}), and once the results are back
it reports them. For measuring the wire, a line `/stream N` (N up to 1,000,000) makes it stream
N short chunks `w0 `, `w1 `, … as its answer instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable

import anyio

from acp_memory.llm.types import (
    ChatRequest,
    Finished,
    Message,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
)

_WORD = re.compile(r"\S+\s*")
_DIRECTIVE = re.compile(r"^\s*/tool\s+(?P<name>[\w.-]+)\s*(?P<args>\{.*\})?\s*$", re.MULTILINE)
_STREAM = re.compile(r"^\s*/stream\s+(?P<count>\d{1,7})\s*$", re.MULTILINE)
_QUOTE_LIMIT = 400
_MAX_STREAM = 1_000_000


class OfflineProvider:
    """Answers from what it received, and says plainly what it is."""

    name = "offline"

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        # The messages past the cacheable prefix are runtime state (the turn context), not
        # conversation: the offline model answers the conversation alone.
        prefix = request.messages[: request.cache_prefix_len or len(request.messages)]
        conversation = [m for m in prefix if m.role != "system"]
        calls = tool_calls_requested(conversation)
        count = stream_requested(conversation)
        pieces: Iterable[str]
        if count is not None:
            pieces = (f"w{i} " for i in range(count))
        else:
            pieces = _WORD.findall(compose_reply(conversation) if not calls else _calling(calls))
        output = 0
        for piece in pieces:
            # A checkpoint per word keeps the stream cancellable and interleaved like a real one.
            await anyio.lowlevel.checkpoint()
            output += len(piece)
            yield TextDelta(piece)
        for call in calls:
            yield ToolCallReady(call)
        usage = Usage(input_tokens=_count(request.messages), output_tokens=output // 4)
        yield Finished("tool_calls" if calls else "stop", usage)


def tool_calls_requested(conversation: list[Message]) -> list[ToolCall]:
    """The `/tool` lines of the user's newest message, unless they were already answered."""
    if not conversation or conversation[-1].role != "user":
        return []
    step = len(conversation)
    return [
        ToolCall(f"offline_{step}_{i}", m["name"], m["args"] or "{}")
        for i, m in enumerate(_DIRECTIVE.finditer(conversation[-1].content))
    ]


def stream_requested(conversation: list[Message]) -> int | None:
    """N from a `/stream N` line of the user's newest message, else None."""
    if not conversation or conversation[-1].role != "user":
        return None
    match = _STREAM.search(conversation[-1].content)
    return None if match is None else min(int(match["count"]), _MAX_STREAM)


def compose_reply(conversation: list[Message]) -> str:
    """The offline model's answer: tool results when they just came back, else an echo."""
    results = _trailing_results(conversation)
    if results:
        return "\n".join(
            f"The tool {m.name} returned:\n{_clip(m.content, _QUOTE_LIMIT)}" for m in results
        )
    users = [m for m in conversation if m.role == "user"]
    last = users[-1].content.strip() if users else ""
    turn = len(users)
    lines = [
        "I am the built-in offline model of acp-memory: no network and no API key, "
        "so I can only answer from what I received.",
        f'You said: "{_clip(last, _QUOTE_LIMIT)}"' if last else "Your message was empty.",
        f"This is message {turn} of our conversation.",
    ]
    if turn > 1:
        lines.append(f'Your previous message was: "{_clip(users[-2].content.strip())}"')
    return "\n".join(lines)


def _calling(calls: list[ToolCall]) -> str:
    names = ", ".join(f"{c.name} {json.dumps(_args(c))}" for c in calls)
    return f"Calling {names}."


def _args(call: ToolCall) -> object:
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments


def _trailing_results(conversation: list[Message]) -> list[Message]:
    results: list[Message] = []
    for m in reversed(conversation):
        if m.role != "tool":
            break
        results.append(m)
    return results[::-1]


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _count(messages: list[Message]) -> int:
    return sum(len(m.content) for m in messages) // 4
