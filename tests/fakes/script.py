"""What a fake model server answers: replies described once, rendered by each fake's dialect.

Build replies with the functions below and queue them with `server.script(...)`:

    text("Hello there", chunks=3, reasoning="Let me think")   # streamed in 3 pieces
    tool_calls(call("read", {"path": "a.md"}, chunks=4), call("ls", {}), text="Looking.")
    text("too long", finish="length")                          # a max-tokens stop
    text("Hi").costing(1200, 95, cached=800)                   # the usage it reports
    error(429, "slow down", retry_after=2)                     # before any output
    error(402, "subscription expired")
    error(529, "Overloaded", in_stream=True)                   # 200, then an error event
    text("Hel", chunks=2).then_error(500, "boom")              # some output, then an error event
    text("Hello world", chunks=4).broken_after(2)              # 2 pieces, then the socket closes
    text("Hello", chunks=2).stalled_after(1, release=event)    # 1 piece, wait for event, go on
    stall()                                                    # headers only, then silence forever
    stall(before_headers=True)                                 # not even the headers
    dropped()                                                  # read the request, close, no answer
    verbatim({"choices": ["x"]}, ("message_stop", {}))         # exactly these SSE events
    verbatim_answer({"choices": "x"})                          # exactly this JSON answer
    page(502, "<html>...</html>")                              # a proxy's page, not JSON
    endless(b" ", every=0.05)                                  # a byte at a time, for ever

Counting for broken_after/stalled_after is in output pieces (reasoning, text, tool-call chunks),
the same for both dialects; 0 means before the first byte of the body. A request with
"stream": false gets the same reply as one JSON answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import anyio


@dataclass(frozen=True)
class Call:
    """One scripted tool call; arguments go out split in `chunks` pieces."""

    name: str
    arguments: str
    id: str | None = None
    chunks: int = 1


@dataclass(frozen=True)
class Reply:
    """One scripted answer, or one scripted fault."""

    text: str = ""
    chunks: int = 1
    reasoning: str = ""
    calls: tuple[Call, ...] = ()
    finish: str | None = None  # "stop" | "length" | "tool_calls"; default from calls
    usage: tuple[int, int] = (12, 7)  # (input, output) tokens
    cached: int = 0  # of the input tokens, those read from the provider's prompt cache
    status: int = 200
    message: str = ""  # the error message of an error reply
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # an error body to send verbatim instead of the dialect's
    stream_error: int | None = None  # the status of an error event sent inside a 200 stream
    break_after: int | None = None
    stall_after: int | None = None
    release: anyio.Event | None = None  # ends a stall; None stalls until the client goes
    stall_before_headers: bool = False
    drop: bool = False
    events: tuple[tuple[str | None, Any], ...] | None = None  # SSE events sent as they are
    raw_body: bytes | None = None  # a body sent as it is, whatever the status
    endless: bytes | None = None  # a 200 body repeating these bytes until the client leaves
    every: float = 0.0  # seconds between two of those pieces (a drip)
    content_type: str = "application/json"

    @property
    def finish_reason(self) -> str:
        return self.finish or ("tool_calls" if self.calls else "stop")

    def then_error(self, status: int, message: str) -> Reply:
        """This reply's output followed by an error event inside the stream."""
        return replace(self, stream_error=status, message=message)

    def costing(self, tokens_in: int, tokens_out: int, cached: int = 0) -> Reply:
        """This reply, its usage reporting these tokens (cached: of tokens_in)."""
        return replace(self, usage=(tokens_in, tokens_out), cached=cached)

    def broken_after(self, pieces: int) -> Reply:
        """This reply cut off (connection closed) after that many output pieces."""
        return replace(self, break_after=pieces)

    def stalled_after(self, pieces: int, release: anyio.Event | None = None) -> Reply:
        """This reply pausing after that many output pieces until release is set."""
        return replace(self, stall_after=pieces, release=release)


def text(
    content: str,
    *,
    chunks: int = 1,
    reasoning: str = "",
    finish: str | None = None,
    usage: tuple[int, int] = (12, 7),
) -> Reply:
    """A plain answer streamed in `chunks` pieces (reasoning, if any, comes first)."""
    return Reply(text=content, chunks=chunks, reasoning=reasoning, finish=finish, usage=usage)


def call(
    name: str, arguments: dict[str, Any] | str, *, id: str | None = None, chunks: int = 1
) -> Call:
    """A tool call; a dict is sent as its JSON text."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return Call(name, args, id, chunks)


def tool_calls(*calls: Call, text: str = "", reasoning: str = "") -> Reply:
    """An answer that calls tools (several calls in one message are fine)."""
    return Reply(text=text, reasoning=reasoning, calls=calls)


def error(
    status: int,
    message: str = "scripted error",
    *,
    retry_after: float | str | None = None,
    headers: dict[str, str] | None = None,
    body: Any = None,
    in_stream: bool = False,
) -> Reply:
    """An HTTP error before any output, or with in_stream=True an error event inside a 200."""
    all_headers = dict(headers or {})
    if retry_after is not None:
        all_headers["Retry-After"] = str(retry_after)
    if in_stream:
        return Reply(stream_error=status, message=message, headers=all_headers)
    return Reply(status=status, message=message, headers=all_headers, body=body)


def stall(release: anyio.Event | None = None, *, before_headers: bool = False) -> Reply:
    """Silence: after the headers (or before them) until release is set or the client leaves."""
    return Reply(text="late", stall_after=0, release=release, stall_before_headers=before_headers)


def dropped() -> Reply:
    """The connection closes after the request, with no answer (a stale keep-alive socket)."""
    return Reply(drop=True)


def verbatim(*events: Any) -> Reply:
    """A 200 stream of exactly these events, for malformed ones: each is its data (sent as JSON,
    a str as it is) or an (event name, data) pair. Nothing is added, not even [DONE]."""
    pairs = tuple(e if isinstance(e, tuple) else (None, e) for e in events)
    return Reply(events=pairs)


def verbatim_answer(answer: Any) -> Reply:
    """A 200 JSON answer of exactly this value, for requests with "stream": false."""
    return Reply(raw_body=json.dumps(answer).encode())


def endless(piece: bytes, *, every: float = 0.0) -> Reply:
    """A 200 body that never ends: `piece` again and again (`every` seconds apart, a drip),
    until the client hangs up."""
    return Reply(endless=piece, every=every)


def page(status: int, content: str, content_type: str = "text/html") -> Reply:
    """A body that is not JSON, as a web server or a proxy in the way would send."""
    return Reply(status=status, raw_body=content.encode(), content_type=content_type)


def split(content: str, pieces: int) -> list[str]:
    """content in `pieces` nearly equal parts (fewer when it is shorter)."""
    if not content:
        return []
    pieces = max(1, min(pieces, len(content)))
    size, extra = divmod(len(content), pieces)
    parts, start = [], 0
    for i in range(pieces):
        end = start + size + (1 if i < extra else 0)
        parts.append(content[start:end])
        start = end
    return parts
