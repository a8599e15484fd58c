"""Provider-neutral chat types: what the engine sends and the events a stream yields."""

from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

from acp_memory.text.lines import first_line

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCall:
    """A complete tool call; arguments is the raw JSON text the model produced."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Image:
    """An image the user sent: its MIME type and its bytes in base64."""

    mime_type: str
    data: str

    @property
    def size(self) -> int:
        """Its size in bytes, decoded (the ACP layer took only valid base64)."""
        padding = len(self.data) - len(self.data.rstrip("="))
        return len(self.data) * 3 // 4 - padding


@dataclass(frozen=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # the tool's name on a tool result
    # A user message holding images, text and images in order; content is then its text,
    # each image marked [image], for whoever reads text alone.
    parts: tuple[str | Image, ...] = ()


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class ChatRequest:
    model: str  # the upstream id, as it goes on the wire
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 8192
    temperature: float | None = None
    tool_choice: Literal["auto", "none", "required"] | None = None
    stream: bool = True
    # How many leading messages form the stable, cacheable prefix (system + history).
    cache_prefix_len: int = 0


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class ToolCallReady:
    call: ToolCall


# Why the provider ended its answer (the turn maps it to an ACP stop reason).
FinishReason = Literal["stop", "tool_calls", "length", "refusal", "other"]


@dataclass(frozen=True)
class Finished:
    reason: FinishReason
    usage: Usage | None = None
    # Why the provider's usage of this answer was voided (a count out of range, a block of
    # the wrong shape), "" when it stands; usage is None then.
    usage_void: str = ""


StreamEvent = TextDelta | ReasoningDelta | ToolCallReady | Finished


class LLMError(Exception):
    """A failed model call, with what the retry policy and the fallback chain need to know."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        provider: str = "",
        after_output: bool = False,
        retryable: bool = False,
        retry_after: float | None = None,
        model: str = "",
        url: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.provider = provider
        self.after_output = after_output
        self.retryable = retryable
        self.retry_after = retry_after
        # Which call failed: a wrong api_base or model id is found from these alone.
        self.model = model
        self.url = url

    def __str__(self) -> str:
        where = "after some output" if self.after_output else "before any output"
        call = f"model {self.model}" if self.model else ""
        if self.url:
            call = f"{call} at {self.url}".lstrip()
        status = f"{self.status} " if self.status else ""
        prov = f"{self.provider}: " if self.provider else ""
        return f"{prov}{status}{self.message} ({f'{call}, ' if call else ''}{where})"

    @property
    def brief(self) -> str:
        """One short line for a log: the status when there is one, else the start of the message.

        The provider's own words are left to the final error, so that a long error page is
        not repeated in every retry line.
        """
        prov = f"{self.provider}: " if self.provider else ""
        if self.status:
            return f"{prov}{self.status} {status_phrase(self.status)}".rstrip()
        return prov + first_line(self.message, 100)


def status_phrase(status: int) -> str:
    """The reason phrase of an HTTP status ("" for a status HTTP does not name)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Overloaded" if status == 529 else ""
