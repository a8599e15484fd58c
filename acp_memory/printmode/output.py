"""Print mode's stdout in its three formats: the reply as text, one JSON result object, or a
JSON line per session update followed by that result."""

from __future__ import annotations

import json
from typing import Any, Protocol, TextIO

from acp_memory.engine.events import TurnEvent
from acp_memory.printmode.options import OutputFormat


class Output(Protocol):
    def text(self, piece: str) -> None:
        """A piece of the reply as it streams in."""

    def event(self, session_id: str, event: TurnEvent) -> None:
        """An engine event of the turn, as it happens."""

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        """A session/update payload (memory_run included)."""

    def end_reply(self) -> None:
        """The turn is over (its memory run may not be)."""

    def result(self, result: dict[str, Any] | None) -> None:
        """The end: the result object, or None when the turn failed."""


class Stdout:
    """stdout for the writers: once its reader has gone (`acp-memory -p ... | head`), the
    rest is dropped, so the turn still ends and its session is saved."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.gone = False

    def write(self, text: str) -> None:
        if self.gone:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            self.gone = True  # the failed flush dropped its buffer: nothing is left for exit


class TextOutput:
    """The reply alone, streamed as it comes, ending with a newline."""

    def __init__(self, out: TextIO) -> None:
        self.out = Stdout(out)
        self._line_open = False  # the reply's last line has no newline yet
        self._broken = False  # break_line ended a line the reply had not ended

    def text(self, piece: str) -> None:
        if self._broken and piece.startswith("\n"):
            piece = piece[1:]  # that break already stands for the separator's first newline
        if piece:
            self._broken = False
            self.out.write(piece)
            self._line_open = not piece.endswith("\n")

    def break_line(self) -> None:
        """End the line the reply is in, for a console line on the same terminal."""
        if self._end_line():
            self._broken = True

    def event(self, session_id: str, event: TurnEvent) -> None:
        return None

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        return None

    def end_reply(self) -> None:
        self._end_line()  # a partial reply too: the shell prompt starts on its own line

    def result(self, result: dict[str, Any] | None) -> None:
        self.end_reply()

    def _end_line(self) -> bool:
        if not self._line_open:
            return False
        self.out.write("\n")
        self._line_open = False
        return True


class JsonOutput:
    """One result object at the end, on one line."""

    def __init__(self, out: TextIO) -> None:
        self.out = Stdout(out)

    def text(self, piece: str) -> None:
        return None

    def event(self, session_id: str, event: TurnEvent) -> None:
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


class StreamJsonOutput(JsonOutput):
    """A JSON line per session update as it happens, then the result object."""

    def __init__(self, out: TextIO) -> None:
        super().__init__(out)
        # The ACP payloads (and their wire models) load for this format only.
        from acp_memory.acp.updates import event_update

        self._payload = event_update

    def event(self, session_id: str, event: TurnEvent) -> None:
        self.update(session_id, self._payload(event))

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        self._line({"type": "session_update", "sessionId": session_id, "update": update})


def output_for(fmt: OutputFormat, out: TextIO) -> Output:
    """The writer of one output format."""
    if fmt == "json":
        return JsonOutput(out)
    if fmt == "stream-json":
        return StreamJsonOutput(out)
    return TextOutput(out)
