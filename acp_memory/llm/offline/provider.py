"""The offline provider: picks the main agent or the memory child, and streams the answer."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable

import anyio

from acp_memory.llm.offline.main_agent import main_step, stream_requested
from acp_memory.llm.offline.memory_child import MEMORY_CHILD_TOOL, memory_step
from acp_memory.llm.offline.tidy_child import TIDY_CHILD_TOOL, tidy_step
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


class OfflineProvider:
    """Answers from what it received, and says plainly what it is."""

    name = "offline"

    def __init__(self, delay_ms: int = 0) -> None:
        # Lets a person or a browser test watch a run in flight; 0 answers at once.
        self.delay_s = max(0, delay_ms) / 1000

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        if self.delay_s:
            await anyio.sleep(self.delay_s)  # a sleep, so that a cancel ends it at once
        # The messages past the cacheable prefix are runtime state (the turn context), not
        # conversation: the offline model answers the conversation alone.
        split = request.cache_prefix_len or len(request.messages)
        conversation = [m for m in request.messages[:split] if m.role != "system"]
        offered = {t.name for t in request.tools}
        calls: list[ToolCall]
        pieces: Iterable[str]
        if TIDY_CHILD_TOOL in offered:
            text, calls = tidy_step(conversation)
            pieces = text.lstrip().splitlines(keepends=True)
        elif MEMORY_CHILD_TOOL in offered:
            text, calls = memory_step(conversation, offered)
            # A line at a time: nobody watches the child's words arrive (its log shows whole
            # lines), and every chunk costs the run's turn a pass through its engine and log.
            # The same text as word by word, which never starts with blanks.
            pieces = text.lstrip().splitlines(keepends=True)
        else:
            text, calls = main_step(conversation, request.messages[split:])
            count = stream_requested(conversation)
            pieces = (f"w{i} " for i in range(count)) if count is not None else _WORD.findall(text)
        output = 0
        for piece in pieces:
            # A checkpoint per piece keeps the stream cancellable and interleaved like a real one.
            await anyio.lowlevel.checkpoint()
            output += len(piece)
            yield TextDelta(piece)
        for call in calls:
            yield ToolCallReady(call)
        usage = Usage(input_tokens=_count(request.messages), output_tokens=output // 4)
        yield Finished("tool_calls" if calls else "stop", usage)


def _count(messages: list[Message]) -> int:
    return sum(len(m.content) for m in messages) // 4
