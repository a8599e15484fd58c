"""Server-sent events: an incremental decoder over text lines (the WHATWG rules we need)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SSEEvent:
    event: str  # "message" when the server named none
    data: str


class SSEDecoder:
    """Feed it lines without their terminators; it returns an event at each blank line."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> SSEEvent | None:
        """One line in, an event out when the line completes one."""
        line = line.rstrip("\r\n")
        if not line:
            return self._dispatch()
        if line.startswith(":"):  # a comment: keep-alives, OpenRouter's "PROCESSING"
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None

    def flush(self) -> SSEEvent | None:
        """The pending event when the stream ended without a final blank line."""
        return self._dispatch()

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = SSEEvent(self._event or "message", "\n".join(self._data))
        self._event, self._data = "", []
        return event
