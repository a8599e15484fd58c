"""A fake OpenAI-compatible embeddings server: POST /v1/embeddings with vectors the test chooses.

    async with FakeEmbeddings(keyed({"apple": [1, 0, 0]}, default=[0, 0, 1])) as server:
        ...                                     # api_base = server.base_url
        server.inputs                           # every text embedded, in arrival order
        server.script(error(401, "bad key"))    # the next request is refused
        server.script(stall(release, before_headers=True))  # silent until release (or timeout)
        server.script(server.answer(lambda text: [1.0, 2.0]))  # vectors of another length

With an empty script each request is answered with `vector_of(text)` for each input, in order.
`unreachable_url()` is an address where nothing listens (a provider that is down).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .httpserver import FakeModelServer, Recorded, Scripted
from .script import Reply, verbatim_answer

VectorOf = Callable[[str], Sequence[float]]


def keyed(table: Mapping[str, Sequence[float]], default: Sequence[float]) -> VectorOf:
    """text -> the vector of the first marker word (a key of table) it holds, else default;
    markers are tried in the table's order, case-insensitively."""

    def vector_of(text: str) -> Sequence[float]:
        lowered = text.lower()
        return next((v for marker, v in table.items() if marker.lower() in lowered), default)

    return vector_of


def unreachable_url() -> str:
    """An api_base on loopback where nothing listens: every request is refused at connect."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class FakeEmbeddings(FakeModelServer):
    path = "/v1/embeddings"

    def __init__(
        self, vector_of: VectorOf, *replies: Scripted, api_key: str | None = None
    ) -> None:
        super().__init__(*replies, default=Reply(), api_key=api_key)
        self.vector_of = vector_of  # a test may swap it between passes

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def inputs(self) -> list[str]:
        """Every text received, across requests, in arrival order."""
        return [text for request in self.requests for text in inputs_of(request)]

    def answer(self, vector_of: VectorOf) -> Callable[[Recorded], Reply]:
        """A scripted reply with vectors from vector_of instead of the server's (any length)."""
        return lambda request: verbatim_answer(self._answer(vector_of, request))

    def presented_key(self, request: Recorded) -> str:
        return request.headers.get("authorization", "").removeprefix("Bearer ")

    def error_body(self, reply: Reply) -> Any:
        return {"error": {"message": reply.message, "type": "invalid_request_error", "code": None}}

    def json_answer(self, reply: Reply, request: Recorded) -> Any:
        return self._answer(self.vector_of, request)

    @staticmethod
    def _answer(vector_of: VectorOf, request: Recorded) -> dict[str, Any]:
        data = [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in vector_of(text)]}
            for i, text in enumerate(inputs_of(request))
        ]
        model = (request.json or {}).get("model", "")
        return {"object": "list", "data": data, "model": model,
                "usage": {"prompt_tokens": 0, "total_tokens": 0}}


def inputs_of(request: Recorded) -> list[str]:
    """The texts of one request ("input" is a string or a list of them)."""
    given = (request.json or {}).get("input", [])
    return [given] if isinstance(given, str) else list(given)
