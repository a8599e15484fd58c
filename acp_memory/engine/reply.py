"""A turn's answer as one text, for the surfaces that show the reply without its tool calls
(print mode, the OpenAI-compatible route)."""

from __future__ import annotations

from acp_memory.engine.events import AgentText, ToolCallFinished, ToolCallStarted, TurnEvent


class Reply:
    """The assistant's messages of a turn joined into one text: one blank line between two
    messages that a tool call separates."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._tool_since_text = False

    def add(self, event: TurnEvent) -> str:
        """Take an engine event; the text it adds to the reply, a separator first at a new
        message ("" for an event that adds none)."""
        if isinstance(event, ToolCallStarted | ToolCallFinished):
            self._tool_since_text = True
            return ""
        if not isinstance(event, AgentText) or not event.text:
            return ""
        piece = event.text
        if self._tool_since_text and self._parts:
            # A message that already ended its line needs one newline for the blank line.
            piece = ("\n" if self._parts[-1].endswith("\n") else "\n\n") + piece
        self._tool_since_text = False
        self._parts.append(piece)
        return piece

    @property
    def text(self) -> str:
        return "".join(self._parts)
