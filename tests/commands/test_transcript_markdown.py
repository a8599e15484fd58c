"""The transcript as markdown (/export, /compact): each tool call collapsed with its outcome
and result, a fence no backtick run inside can close, results cut where asked."""

from __future__ import annotations

from acp_memory.commands.markdown import render_transcript
from acp_memory.sessions.model import StoredToolCall, TranscriptMessage


def test_tool_calls_collapse_with_their_outcome_fenced_and_cut_to_the_limit():
    result = "````py\nprint(1)\n````" + "x" * 100
    messages = [
        TranscriptMessage(role="user", content="Show a.md"),
        TranscriptMessage(
            role="assistant",
            tool_calls=[
                StoredToolCall(
                    id="c1", name="read_file", arguments='{"path":"a.md"}', title="Read a.md"
                ),
                StoredToolCall(id="c2", name="grep", arguments="{broken"),
                StoredToolCall(id="c3", name="glob", arguments="{}"),
            ],
        ),
        TranscriptMessage(role="tool", tool_call_id="c1", content=result),
        TranscriptMessage(role="tool", tool_call_id="c2", content="bad regex", is_error=True),
        TranscriptMessage(role="compaction", content="The user reads a.md."),
    ]
    text = render_transcript(messages, title="Chat", output_limit=30)
    read, grep, glob = text.split("<details>")[1:]
    assert text.startswith("# Chat\n\n## User\n\nShow a.md\n\n")
    assert "## Assistant" not in text  # an assistant message with no text has no heading
    assert read.startswith("<summary>Tool: Read a.md (completed)</summary>")
    assert '```json\n{\n  "path": "a.md"\n}\n```' in read
    # Longer than the four backticks inside, and cut after 30 characters.
    assert f"`````\n{result[:30]}\n[… {len(result) - 30} more characters]\n`````" in read
    assert grep.startswith("<summary>Tool: grep (failed)</summary>")
    assert "```json\n{broken\n```" in grep  # arguments that are not JSON, as they are
    assert glob.startswith("<summary>Tool: glob (no result)</summary>")
    assert text.endswith("</details>\n\n## Summary of the above\n\nThe user reads a.md.\n")
