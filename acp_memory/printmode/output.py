"""Print mode's stdout in its three formats: the reply as text, one JSON result object, or a
JSON line per session update followed by that result."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol, TextIO

from acp_memory.engine.events import TurnEvent
from acp_memory.llm.usage import UsageMeter
from acp_memory.printmode.options import OutputFormat
from acp_memory.stdout import Stdout


class Output(Protocol):
    def text(self, piece: str) -> None:
        """A piece of the reply as it streams in."""

    def event(self, session_id: str, event: TurnEvent) -> None:
        """An engine event of the turn, as it happens."""

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        """A session/update payload (memory_run included)."""

    def end_reply(self) -> None:
        """The turn is over (its memory run may not be)."""

    def result(self, result: dict[str, Any]) -> None:
        """The end: the result object (see result_object), whatever the turn did."""


class TextOutput:
    """The reply alone, streamed as it comes, ending with a newline."""

    def __init__(self, out: TextIO) -> None:
        self.out = Stdout(out)
        self._line_open = False  # the reply's last line has no newline yet
        self._broken = False  # break_line ended a line the reply had not ended
        # Told each time the reply (written and flushed) is at the start of a line.
        self.line_start: Callable[[], None] | None = None

    def text(self, piece: str) -> None:
        if self._broken and piece.startswith("\n"):
            piece = piece[1:]  # that break already stands for the separator's first newline
        if piece:
            self._broken = False
            ended, newline, rest = piece.rpartition("\n")
            if newline:
                self.out.write(ended + newline)
                self._line_open = False
                self._at_line_start()
            if rest:
                self.out.write(rest)
                self._line_open = True

    def mid_line(self) -> bool:
        """Whether the reply's last line has no newline yet."""
        return self._line_open

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
        self._at_line_start()

    def result(self, result: dict[str, Any]) -> None:
        self.end_reply()

    def _end_line(self) -> bool:
        if not self._line_open:
            return False
        self.out.write("\n")
        self._line_open = False
        return True

    def _at_line_start(self) -> None:
        if self.line_start is not None:
            self.line_start()


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

    def result(self, result: dict[str, Any]) -> None:
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


def result_object(
    exit_code: int,
    error: str | None,
    *,
    result: str = "",
    stop_reason: str | None = None,
    session_id: str | None = None,
    usage: dict[str, int] | None = None,
    memory: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The object that ends stdout in json and stream-json however the run ended, so that a
    script always has one to parse: `is_error` (a non-zero exit), `error` (the stderr line,
    None on success) and `exitCode` (see options.EXIT_CODES_HELP)."""
    return {
        "type": "result",
        "result": result,
        "stopReason": stop_reason,
        "sessionId": session_id,
        "usage": usage if usage is not None else UsageMeter().as_json(),  # no call made
        "memory": memory,
        "is_error": exit_code != 0,
        "error": error,
        "exitCode": exit_code,
    }


def end_with_failure(fmt: OutputFormat, out: TextIO, exit_code: int, error: str) -> None:
    """Print mode stopped before any turn (a bad config, an empty prompt): its result object
    all the same; text output prints nothing."""
    output_for(fmt, out).result(result_object(exit_code, error))


def output_for(fmt: OutputFormat, out: TextIO) -> Output:
    """The writer of one output format."""
    if fmt == "json":
        return JsonOutput(out)
    if fmt == "stream-json":
        return StreamJsonOutput(out)
    return TextOutput(out)
