"""The offline model as the main agent: it answers from what it received.

A line `/tool NAME {"arg": "value"}` in the user's message makes it call that tool (arguments
default to {}), and once the results are back it reports them. For measuring the wire, a line
`/stream N` (N up to 1,000,000) makes it stream N short chunks `w0 `, `w1 `, … instead. When the
turn context after the history carries a "## Long-term memory" report, its answer repeats it
under "From memory:". An image in the user's message is acknowledged by its size, never seen.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from acp_memory.llm.offline.recall_report import NO_MEMORY_HITS
from acp_memory.llm.offline.wording import announce, clip, numbered_calls
from acp_memory.llm.types import Image, Message, ToolCall

_DIRECTIVE = re.compile(r"^\s*/tool\s+(?P<name>[\w.-]+)\s*(?P<args>\{.*\})?\s*$", re.MULTILINE)
_STREAM = re.compile(r"^\s*/stream\s+(?P<count>\d{1,7})\s*$", re.MULTILINE)
_QUOTE_LIMIT = 400
_MAX_STREAM = 1_000_000
MEMORY_SECTION = "## Long-term memory"


def main_step(conversation: list[Message], tail: Sequence[Message]) -> tuple[str, list[ToolCall]]:
    """The main agent's answer to the conversation, given the turn context after it (`tail`):
    the text it says and the tool calls it makes."""
    calls = tool_calls_requested(conversation)
    if calls:
        return announce(calls), calls
    text = compose_reply(conversation)
    memory = memory_report(tail)
    if memory and not _trailing_results(conversation):
        text += f"\nFrom memory:\n{memory}"
    return text, []


def tool_calls_requested(conversation: list[Message]) -> list[ToolCall]:
    """The `/tool` lines of the user's newest message, unless they were already answered."""
    if not conversation or conversation[-1].role != "user":
        return []
    found = _DIRECTIVE.finditer(conversation[-1].content)
    return numbered_calls(len(conversation), [(m["name"], m["args"] or "{}") for m in found])


def stream_requested(conversation: list[Message]) -> int | None:
    """N from a `/stream N` line of the user's newest message, else None."""
    if not conversation or conversation[-1].role != "user":
        return None
    match = _STREAM.search(conversation[-1].content)
    return None if match is None else min(int(match["count"]), _MAX_STREAM)


def memory_report(tail: Sequence[Message]) -> str | None:
    """The memory report of the turn context (the last message), unless there is none or it
    found nothing."""
    if not tail or tail[-1].role != "user":
        return None
    text = tail[-1].content
    at = text.find(MEMORY_SECTION + "\n")
    if at < 0:
        return None
    # The memory section is the block's last, so it runs to the closing tag.
    report = text[at + len(MEMORY_SECTION) :].rsplit("</turn_context>", 1)[0].strip()
    return None if not report or report == NO_MEMORY_HITS else report


def compose_reply(conversation: list[Message]) -> str:
    """The offline model's answer: tool results when they just came back, else an echo."""
    results = _trailing_results(conversation)
    if results:
        return "\n".join(
            f"The tool {m.name} returned:\n{clip(m.content, _QUOTE_LIMIT)}" for m in results
        )
    users = [m for m in conversation if m.role == "user"]
    last = users[-1].content.strip() if users else ""
    turn = len(users)
    lines = [
        "I am the built-in offline model of acp-memory: no network and no API key, "
        "so I can only answer from what I received.",
        f'You said: "{clip(last, _QUOTE_LIMIT)}"' if last else "Your message was empty.",
        f"This is message {turn} of our conversation.",
    ]
    if users:
        # It cannot look at an image, only say that one arrived (the request carried it).
        lines += [
            f"I received an image of {p.size} bytes ({p.mime_type})."
            for p in users[-1].parts
            if isinstance(p, Image)
        ]
    if turn > 1:
        lines.append(f'Your previous message was: "{clip(users[-2].content.strip())}"')
    return "\n".join(lines)


def _trailing_results(conversation: list[Message]) -> list[Message]:
    results: list[Message] = []
    for m in reversed(conversation):
        if m.role != "tool":
            break
        results.append(m)
    return results[::-1]
