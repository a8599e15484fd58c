"""Print mode's stdout in its three formats: the reply as text, one JSON result object, or a
JSON line per session update followed by that result."""

from __future__ import annotations

import json
from typing import Any, Protocol, TextIO

from acp_memory.printmode.options import OutputFormat


class Reply:
    """The assistant's messages of the turn, as one text: a blank line between two messages
    (a tool call in between ends a message)."""

    def __init__(self) -> None:
        self.text = ""
        self._ended = False  # the last message ended; the next text starts a new one

    def add(self, text: str) -> str:
        """Take a text delta; what to print for it (a separator first, at a new message)."""
        piece = text
        if self._ended and self.text and text:
            piece = ("\n" if self.text.endswith("\n") else "\n\n") + text
        if text:
            self._ended = False
        self.text += piece
        return piece

    def end_message(self) -> None:
        self._ended = True


class Output(Protocol):
    def text(self, piece: str) -> None:
        """A piece of the reply as it streams in."""

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        """A session/update payload (memory_run included)."""

    def end_reply(self) -> None:
        """The turn is over (its memory run may not be)."""

    def result(self, result: dict[str, Any] | None) -> None:
        """The end: the result object, or None when the turn failed."""


class TextOutput:
    """The reply alone, streamed as it comes, ending with a newline."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._last = ""
        self._broken = False  # break_line ended a line the reply had not ended

    def text(self, piece: str) -> None:
        if self._broken and piece.startswith("\n"):
            piece = piece[1:]  # that break already stands for the separator's first newline
        if piece:
            self._broken = False
            self.out.write(piece)
            self.out.flush()
            self._last = piece[-1]

    def break_line(self) -> None:
        """End the line the reply is in, for a console line on the same terminal."""
        if self._last not in ("", "\n"):
            self.out.write("\n")
            self.out.flush()
            self._last = "\n"
            self._broken = True

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        return None

    def end_reply(self) -> None:
        if self._last not in ("", "\n"):
            self.out.write("\n")  # a partial reply too: the shell prompt starts on its own line
            self.out.flush()
            self._last = "\n"

    def result(self, result: dict[str, Any] | None) -> None:
        self.end_reply()


class JsonOutput:
    """One result object at the end, on one line."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def text(self, piece: str) -> None:
        return None

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        return None

    def end_reply(self) -> None:
        return None

    def result(self, result: dict[str, Any] | None) -> None:
        if result is not None:
            self._line(result)

    def _line(self, obj: dict[str, Any]) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.out.flush()


class StreamJsonOutput(JsonOutput):
    """A JSON line per session update as it happens, then the result object."""

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        self._line({"type": "session_update", "sessionId": session_id, "update": update})


def output_for(fmt: OutputFormat, out: TextIO) -> Output:
    """The writer of one output format."""
    if fmt == "json":
        return JsonOutput(out)
    if fmt == "stream-json":
        return StreamJsonOutput(out)
    return TextOutput(out)
