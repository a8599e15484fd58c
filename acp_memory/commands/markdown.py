"""A transcript as markdown: what /export writes and what /compact asks the model to summarise.

Messages read in order under a heading each; a tool call collapses into a `<details>` block
(its title and outcome as the summary line, its arguments and result inside), and a
compaction marker shows the summary that stood for everything before it.
"""

from __future__ import annotations

import json
import re

from acp_memory.sessions.model import StoredToolCall, TranscriptMessage

_HEADINGS = {"user": "User", "assistant": "Assistant", "compaction": "Summary of the above"}
_BACKTICKS = re.compile(r"`{3,}")


def render_transcript(
    messages: list[TranscriptMessage], *, title: str = "", output_limit: int | None = None
) -> str:
    """The messages as markdown; `output_limit` cuts each tool result to that many characters."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    parts = [f"# {title}"] if title else []
    for m in messages:
        if m.role == "tool":
            continue  # shown inside the call that asked for it
        text = m.content.strip()
        if text:
            parts.append(f"## {_HEADINGS[m.role]}\n\n{text}")
        for call in m.tool_calls or ():
            parts.append(_tool_call(call, results.get(call.id), output_limit))
    return "\n\n".join(parts) + "\n"


def _tool_call(call: StoredToolCall, result: TranscriptMessage | None, limit: int | None) -> str:
    outcome = "no result" if result is None else "failed" if result.is_error else "completed"
    try:
        args = json.dumps(json.loads(call.arguments), ensure_ascii=False, indent=2)
    except ValueError:
        args = call.arguments
    lines = [
        f"<details><summary>Tool: {call.title or call.name} ({outcome})</summary>",
        "",
        fenced(args, "json"),
    ]
    if result is not None and result.content:
        output = result.content
        if limit is not None and len(output) > limit:
            output = f"{output[:limit]}\n[… {len(output) - limit} more characters]"
        lines += ["", fenced(output)]
    lines += ["", "</details>"]
    return "\n".join(lines)


def fenced(text: str, lang: str = "") -> str:
    """text in a code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"
