"""A session's transcript as the messages the model sees."""

from __future__ import annotations

from collections.abc import Sequence

from acp_memory.llm.types import Image, Message, ToolCall
from acp_memory.sessions.model import TextPart, TranscriptMessage

COMPACTED = "The conversation before this point was compacted (/compact). Its summary:"


class ModelHistory:
    """A session's transcript converted for the model, kept between steps: a history only
    grows, so a step converts just the messages it has not met (from the first that is not
    the very object converted before: a reload or a compaction starts again there)."""

    def __init__(self) -> None:
        self.images = True
        self.source: list[TranscriptMessage] = []
        self.converted: list[Message] = []

    def messages(self, history: Sequence[TranscriptMessage], images: bool) -> list[Message]:
        """history as to_llm_message gives it, with or without images."""
        if images != self.images:
            self.images, self.source, self.converted = images, [], []
        same, known = 0, min(len(history), len(self.source))
        while same < known and history[same] is self.source[same]:
            same += 1
        del self.source[same:], self.converted[same:]
        for message in history[same:]:
            self.source.append(message)
            self.converted.append(to_llm_message(message, images))
        return list(self.converted)


def to_llm_message(m: TranscriptMessage, images: bool = True) -> Message:
    """A transcript entry as the provider-neutral message the model sees (a prompt's images
    with it, unless `images` is false)."""
    if m.role == "assistant":
        calls = tuple(ToolCall(c.id, c.name, c.arguments) for c in m.tool_calls or ())
        return Message("assistant", m.content, tool_calls=calls)
    if m.role == "tool":
        # The images a tool returned (an MCP server's), for a model that takes them.
        shown = [
            Image(str(c.get("mimeType", "")), str(c.get("data", "")))
            for c in (m.content_extra or () if images else ())
            if c.get("type") == "image"
        ]
        parts: tuple[str | Image, ...] = (m.content, *shown) if shown else ()
        return Message("tool", m.content, tool_call_id=m.tool_call_id, name=m.name, parts=parts)
    if m.role == "compaction":
        return Message("user", f"{COMPACTED}\n\n{m.content}")
    parts = tuple(
        p.text if isinstance(p, TextPart) else Image(p.mime_type, p.data)
        for p in (m.parts if images and m.parts else ())
    )
    return Message("user", m.content, parts=parts)
