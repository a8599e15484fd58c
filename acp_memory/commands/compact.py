"""/compact [focus]: the session's model folds the history so far into a summary.

The folded messages stay in messages.json; a compaction marker carrying the summary follows
them, later requests start from it (engine: `since_compaction`), and session/load replays it
as an agent message. The memory child plays no part.
"""

from __future__ import annotations

from acp_memory.commands.base import CommandCall
from acp_memory.commands.markdown import render_transcript
from acp_memory.llm.provider import closing
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import Message, TextDelta
from acp_memory.sessions.model import TranscriptMessage, since_compaction

INSTRUCTIONS = (
    "You compact a conversation between a user and a coding assistant into a summary that "
    "replaces it: the assistant will carry on the work from your summary alone. Keep what it "
    "needs: the user's goals and requests, decisions and their reasons, files and code "
    "touched (exact paths and names), commands run and what came of them, errors and how "
    "they were solved, and what is still open. Keep names, paths and numbers exact. Write "
    "plain markdown with no preamble."
)
# Characters of one tool result the summary request shows: the gist of an output, not all of it.
OUTPUT_LIMIT = 2000
CHARS_PER_TOKEN = 4  # a rough rule for English text and code; the reply says "about"


class Compact:
    name = "compact"
    description = "Summarise the conversation so far; later requests start from the summary"
    hint: str | None = "what the summary should focus on (optional)"

    async def run(self, call: CommandCall) -> str:
        session = call.session
        window = since_compaction(session.messages)
        folded = [m for m in window if m.role != "compaction"]
        if not folded:
            return "Nothing to compact: no message since the last summary."
        model = call.runner.model_for(session.record.selected_model_id)
        summary = await summarise(
            model, render_transcript(window, output_limit=OUTPUT_LIMIT), call.argument
        )
        if not summary:
            return "The model returned no summary; nothing was compacted."
        await session.append(TranscriptMessage(role="compaction", content=summary))
        tokens = -(-sum(_chars(m) for m in folded) // CHARS_PER_TOKEN)
        return (
            f"{summary}\n\n(Compacted {len(folded)} messages, about {tokens} tokens; "
            "later requests start from this summary.)"
        )


async def summarise(model: ModelHandle, transcript: str, focus: str) -> str:
    """The model's summary of a markdown transcript (no tools), stripped."""
    ask = "Summarise the conversation above."
    if focus:
        ask += f" Focus on: {focus}"
    request = model.request(
        [Message("system", INSTRUCTIONS), Message("user", f"{transcript}\n---\n\n{ask}")]
    )
    pieces: list[str] = []
    events = model.stream(request)
    async with closing(events):
        async for event in events:
            if isinstance(event, TextDelta):
                pieces.append(event.text)
    return "".join(pieces).strip()


def _chars(m: TranscriptMessage) -> int:
    calls = sum(len(c.arguments) for c in m.tool_calls or ())
    return len(m.content) + len(m.reasoning or "") + calls
