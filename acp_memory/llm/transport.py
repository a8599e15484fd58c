"""HTTP plumbing both providers share: JSON posts, SSE under stall timeouts, error mapping."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import httpx

from acp_memory.llm.provider import closing
from acp_memory.llm.ratelimit import announced_wait
from acp_memory.llm.sse import SSEDecoder, SSEEvent
from acp_memory.llm.types import (
    ChatRequest,
    LLMError,
    Message,
    StreamEvent,
    status_phrase,
)
from acp_memory.text.lines import first_line

log = logging.getLogger(__name__)
T = TypeVar("T")

# Worth another try later: timeouts, conflicts, rate limits and every server-side failure.
_RETRYABLE = frozenset({408, 409, 429})
_MESSAGE_LIMIT = 500
# A body that is not JSON is mostly a proxy's or a web server's page: its first line says enough.
_PAGE_LIMIT = 200
# What reading a decoded payload of the wrong shape raises: .get on a str, a list as a key, ...
_SHAPE_ERRORS = (AttributeError, KeyError, IndexError, TypeError, ValueError, OverflowError)
# How long closing a response may take while the caller is being cancelled.
_CLOSE_GRACE_S = 1.0
# How long to wait for the end of a body after the final event, to keep the connection.
_DRAIN_S = 0.5
# A usage count past this is no real count (ACP's uint64 and a session's cost break on
# 10^30): it voids the answer's usage.
MAX_TOKEN_COUNT = 10**12


class ConnectionDropped(LLMError):
    """The connection broke with no complete answer (a stale keep-alive connection, a reset)."""


@dataclass(frozen=True)
class StreamTimeouts:
    """Seconds a stream may stay silent: before its first event, between events (None: forever)."""

    first_event: float | None = None
    idle: float | None = None

    @classmethod
    def from_ms(cls, first_event_ms: int, idle_ms: int) -> StreamTimeouts:
        """From the config's milliseconds, where 0 disables."""
        return cls(first_event_ms / 1000 or None, idle_ms / 1000 or None)


@dataclass
class Endpoint:
    """One provider URL with its headers; turns every failure into an LLMError."""

    client: httpx.AsyncClient
    provider: str
    url: str
    headers: dict[str, str] = field(repr=False)
    timeout_s: float = 600.0
    timeouts: StreamTimeouts = field(default_factory=StreamTimeouts)
    secret: str = field(default="", repr=False)  # redacted from any message we build

    async def post_json(self, body: dict[str, Any]) -> Any:
        """POST a JSON body and return the decoded JSON answer."""
        try:
            response = await self._post_whole(body)
        except (httpx.HTTPError, TimeoutError) as exc:
            raise self.transport_error(exc) from None
        if response.status_code >= 400:
            raise self.status_error(response)
        try:
            return response.json()
        except ValueError:
            raise self.error(
                f"the answer is not JSON: {first_line(response.text, _PAGE_LIMIT)}"
            ) from None

    async def _post_whole(self, body: dict[str, Any]) -> httpx.Response:
        """POST a JSON body and read the answer whole within timeout_s: httpx's timeouts
        bound each read, which a provider dripping its answer byte by byte never trips."""
        with anyio.fail_after(self.timeout_s):
            return await self.client.post(
                self.url, json=body, headers=self.headers, timeout=self.timeout_s
            )

    async def post_sse(
        self, body: dict[str, Any], last: Callable[[SSEEvent], bool] = lambda _: False
    ) -> AsyncGenerator[SSEEvent, None]:
        """POST a JSON body and yield the answer's events, up to the one `last` recognises."""
        request = self.client.build_request(
            "POST", self.url, json=body, headers=self.headers, timeout=self.timeout_s
        )
        first = self.timeouts.first_event
        deadline = anyio.current_time() + first if first else math.inf
        try:
            # The headers within the first-event timeout, else within timeout_s as a whole.
            with anyio.fail_after(first or self.timeout_s):
                response = await self.client.send(request, stream=True)
        except TimeoutError as exc:
            raise (self.silence_error(first=True) if first else self.transport_error(exc)) from None
        except httpx.HTTPError as exc:
            raise self.transport_error(exc) from None
        try:
            if response.status_code >= 400:
                # A body cut short still leaves the status to report.
                wait = self.timeouts.idle or first or self.timeout_s
                with anyio.move_on_after(wait), suppress(httpx.HTTPError):
                    await response.aread()
                raise self.status_error(response)
            lines = response.aiter_lines()
            decoder = SSEDecoder()
            seen = False
            while True:
                budget = self.timeouts.idle if seen else _left(deadline)
                try:
                    with anyio.fail_after(budget):
                        event = await _next_event(lines, decoder)
                except TimeoutError:
                    raise self.silence_error(first=not seen) from None
                except httpx.HTTPError as exc:
                    raise self.transport_error(exc) from None
                if event is None:
                    return
                seen = True
                if last(event):
                    # Reading the body to its end lets the connection go back to the pool.
                    # A server that hangs up early only costs the pooled connection.
                    with anyio.move_on_after(_DRAIN_S), suppress(httpx.HTTPError):
                        async for _ in lines:
                            pass
                    yield event
                    return
                yield event
        finally:
            # Closing drops the connection at once when the stream was cut short.
            with anyio.move_on_after(_CLOSE_GRACE_S, shield=True):
                await response.aclose()

    def error(self, message: str, **kw: Any) -> LLMError:
        """An LLMError of this provider, with the key scrubbed from the message."""
        return LLMError(self.redact(message), provider=self.provider, **kw)

    def status_error(self, response: httpx.Response) -> LLMError:
        """The error for an HTTP error status, carrying the provider's own message."""
        status = response.status_code
        phrase = response.reason_phrase or status_phrase(status)
        try:
            detail = provider_message(response.content)
        except httpx.ResponseNotRead:  # the body never arrived
            detail = ""
        message = f"{phrase}: {detail}" if detail and detail != phrase else phrase or "error"
        return self.error(
            message,
            status=status,
            retryable=status in _RETRYABLE or status >= 500,
            retry_after=announced_wait(response.headers, status),
        )

    def transport_error(self, exc: httpx.HTTPError | TimeoutError) -> LLMError:
        """The error for a failure below HTTP: a timeout (of one read, or of the whole request:
        TimeoutError), a refused or dropped connection."""
        if isinstance(exc, TimeoutError):
            return self.error(f"no answer within {self.timeout_s:g}s")
        if isinstance(exc, httpx.TimeoutException):
            return self.error(f"no answer within {self.timeout_s:g}s ({type(exc).__name__})")
        what = str(exc) or type(exc).__name__
        return ConnectionDropped(self.redact(f"connection failed: {what}"), provider=self.provider)

    def silence_error(self, *, first: bool) -> LLMError:
        """The error for a stream cut by the first-event or the idle timeout."""
        if first:
            return self.error(f"no answer within {self.timeouts.first_event:g}s of the request")
        return self.error(f"the stream stalled for {self.timeouts.idle:g}s")

    def redact(self, text: str) -> str:
        return text.replace(self.secret, "[redacted]") if self.secret else text

    async def probe(self, body: dict[str, Any]) -> Probe:
        """POST one JSON body and say what came back, without raising."""
        url = self.redact(self.url)
        try:
            response = await self._post_whole(body)
        except (httpx.HTTPError, TimeoutError) as exc:
            return Probe(url, None, self.transport_error(exc).message)
        if response.status_code >= 400:
            return Probe(url, response.status_code, self.status_error(response).message)
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            # A web server or a proxy answered, not a model API.
            problem = f"the answer is not a JSON object: {first_line(response.text, _PAGE_LIMIT)}"
            return Probe(url, response.status_code, self.redact(problem))
        return Probe(url, response.status_code)


@dataclass(frozen=True)
class Probe:
    """What one small call found out about an endpoint."""

    url: str
    status: int | None  # None: no HTTP answer came back at all
    problem: str = ""  # "" when the call succeeded


async def _next_event(lines: AsyncIterator[str], decoder: SSEDecoder) -> SSEEvent | None:
    async for line in lines:
        event = decoder.feed(line)
        if event is not None:
            return event
    return decoder.flush()


class HttpProvider:
    """What the HTTP providers share: one endpoint, answered as a stream or as one JSON body."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        name: str,
        url: str,
        headers: dict[str, str],
        api_key: str,
        timeout_s: float,
        timeouts: StreamTimeouts | None,
    ) -> None:
        self.name = name
        self._endpoint = Endpoint(
            client, name, url, headers, timeout_s, timeouts or StreamTimeouts(), secret=api_key
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, url={self._endpoint.url!r})"

    def stream(self, request: ChatRequest) -> StreamEvents:
        """Yield the answer's events; an LLMError says whether output had already gone out."""
        events = self._stream(request) if request.stream else self._complete(request)
        url = self._endpoint.redact(self._endpoint.url)
        return guard_output(events, model=request.model, url=url)

    async def probe(self, model: str) -> Probe:
        """One non-streaming call for a single token: is the server there, is the key good?"""
        request = ChatRequest(model, [Message("user", "Say OK.")], max_tokens=1, stream=False)
        return await self._endpoint.probe(self.body(request))

    def body(self, request: ChatRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _stream(self, request: ChatRequest) -> StreamEvents:
        raise NotImplementedError

    def _complete(self, request: ChatRequest) -> StreamEvents:
        raise NotImplementedError


def provider_message(body: bytes) -> str:
    """The message inside an error body, whichever of the usual JSON shapes it has."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data: Any = json.loads(text)
    except ValueError:
        return first_line(text, _PAGE_LIMIT)
    if isinstance(data, list) and data:
        data = data[0]
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _clip(error["message"])
        for candidate in (error, data.get("message"), data.get("detail")):
            if isinstance(candidate, str) and candidate:
                return _clip(candidate)
    return _clip(text)


async def guard_output(
    events: AsyncGenerator[T, None], *, model: str = "", url: str = ""
) -> AsyncGenerator[T, None]:
    """Pass events through; an LLMError raised after the first one is marked after_output.

    The error is also given the model and the URL of the call, when it names none.
    """
    produced = False
    async with closing(events):
        try:
            async for event in events:
                produced = True
                yield event
        except LLMError as err:
            err.after_output = err.after_output or produced
            err.model = err.model or model
            err.url = err.url or url
            raise


def parse_json_event(endpoint: Endpoint, data: str) -> dict[str, Any]:
    """One SSE data payload as a JSON object, or an LLMError saying what arrived instead."""
    try:
        value = json.loads(data)
    except ValueError:
        raise endpoint.error(f"the stream sent something that is not JSON: {_clip(data)}") from None
    if not isinstance(value, dict):
        raise endpoint.error(f"the stream sent an unexpected value: {_clip(data)}")
    return value


@contextmanager
def shape_guard(endpoint: Endpoint, what: str, payload: Any) -> Iterator[None]:
    """Reading a payload of an unexpected shape raises this provider's LLMError, not a TypeError.

    The payload is quoted, cut short, so the mistake can be told apart from a bug of ours.
    """
    try:
        yield
    except _SHAPE_ERRORS as exc:
        log.debug("%s: malformed %s", endpoint.provider, what, exc_info=exc)
        text = payload if isinstance(payload, str) else json.dumps(payload)
        raise endpoint.error(f"malformed {what}: {first_line(text, _PAGE_LIMIT)}") from None


def json_object(value: Any) -> dict[str, Any]:
    """A JSON object that may be missing (null): {} then; any other type is malformed."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


def json_array(value: Any) -> list[Any]:
    """A JSON array that may be missing (null): [] then; any other type is malformed."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError(f"expected an array, got {type(value).__name__}")
    return value


def json_text(value: Any) -> str:
    """A JSON string that may be missing (null): "" then; any other type is malformed."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def token_count(value: Any) -> int:
    """A token count of a usage block (null is 0); anything but a whole number in
    0..MAX_TOKEN_COUNT (12.0 is 12) is malformed."""
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKEN_COUNT:
        raise ValueError(f"not a token count: {value!r}")
    return value


def void_usage(raw: Any) -> str:
    """Why a usage block that token_count or its shape refused voids its answer's usage."""
    return f"a malformed usage block: {first_line(json.dumps(raw), _PAGE_LIMIT)}"


StreamEvents = AsyncGenerator[StreamEvent, None]


def _left(deadline: float) -> float | None:
    return None if deadline == math.inf else max(0.0, deadline - anyio.current_time())


def _clip(text: str) -> str:
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "…"
