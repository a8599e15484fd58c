"""The built-in offline model: deterministic, no network, no key."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import anyio

from acp_memory.llm.types import ChatRequest, Finished, Message, StreamEvent, TextDelta, Usage

_WORD = re.compile(r"\S+\s*")
_QUOTE_LIMIT = 400


class OfflineProvider:
    """Answers from what it received, and says plainly what it is."""

    name = "offline"

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        text = compose_reply(request.messages)
        for piece in _WORD.findall(text):
            # A checkpoint per word keeps the stream cancellable and interleaved like a real one.
            await anyio.lowlevel.checkpoint()
            yield TextDelta(piece)
        usage = Usage(input_tokens=_count(request.messages), output_tokens=len(text) // 4)
        yield Finished("stop", usage)


def compose_reply(messages: list[Message]) -> str:
    """The offline model's answer to a conversation."""
    users = [m for m in messages if m.role == "user" and not _is_runtime_context(m)]
    last = users[-1].content.strip() if users else ""
    quoted = last if len(last) <= _QUOTE_LIMIT else last[:_QUOTE_LIMIT] + "…"
    turn = len(users)
    lines = [
        "I am the built-in offline model of acp-memory: no network and no API key, "
        "so I can only answer from what I received.",
        f'You said: "{quoted}"' if quoted else "Your message was empty.",
        f"This is message {turn} of our conversation.",
    ]
    if turn > 1:
        lines.append(f'Your previous message was: "{_clip(users[-2].content.strip())}"')
    return "\n".join(lines)


def _is_runtime_context(message: Message) -> bool:
    return message.content.lstrip().startswith("<turn_context>")


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _count(messages: list[Message]) -> int:
    return sum(len(m.content) for m in messages) // 4
