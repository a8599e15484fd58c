"""A fake Anthropic Messages API: POST /v1/messages, SSE events or JSON, scripted per test.

    async with FakeAnthropic() as server:       # http://127.0.0.1:<free port>
        server.script(tool_calls(call("read", {"path": "a.md"}, chunks=3)), text("Done."))
        ...                                     # point api_base at server.base_url
        assert server.requests[0].json["system"][-1]["cache_control"] == {"type": "ephemeral"}

See fakes.script for the replies and faults; the server records every request it received.
"""

from __future__ import annotations

import json
from typing import Any

from .httpserver import FakeModelServer, Frame, Recorded, sse
from .script import Reply, split

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_ERROR_TYPE = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class FakeAnthropic(FakeModelServer):
    path = "/v1/messages"

    def presented_key(self, request: Recorded) -> str:
        return request.headers.get("x-api-key", "")

    def error_body(self, reply: Reply) -> Any:
        return {
            "type": "error",
            "error": {"type": _error_type(reply.status), "message": reply.message},
        }

    def stream_frames(self, reply: Reply, request: Recorded) -> list[Frame]:
        _, tokens_out = reply.usage
        start = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": (request.json or {}).get("model", ""),
            "stop_reason": None,
            "usage": {**_input_usage(reply), "output_tokens": 1},
        }
        frames = [
            Frame(sse({"type": "message_start", "message": start}, "message_start"), False),
            Frame(sse({"type": "ping"}, "ping"), False),
        ]
        blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        if reply.reasoning:
            blocks.append(
                (
                    {"type": "thinking", "thinking": ""},
                    [
                        {"type": "thinking_delta", "thinking": p}
                        for p in split(reply.reasoning, reply.chunks)
                    ],
                )
            )
        if reply.text:
            blocks.append(
                (
                    {"type": "text", "text": ""},
                    [{"type": "text_delta", "text": p} for p in split(reply.text, reply.chunks)],
                )
            )
        for i, c in enumerate(reply.calls):
            head = {
                "type": "tool_use",
                "id": c.id or f"toolu_{i}_{len(self.requests)}",
                "name": c.name,
                "input": {},
            }
            blocks.append(
                (
                    head,
                    [
                        {"type": "input_json_delta", "partial_json": p}
                        for p in split(c.arguments, c.chunks)
                    ],
                )
            )
        for index, (block, deltas) in enumerate(blocks):
            frames.append(
                Frame(
                    sse(
                        {"type": "content_block_start", "index": index, "content_block": block},
                        "content_block_start",
                    ),
                    False,
                )
            )
            frames += [
                Frame(
                    sse(
                        {"type": "content_block_delta", "index": index, "delta": d},
                        "content_block_delta",
                    ),
                    True,
                )
                for d in deltas
            ]
            if reply.stream_error:
                break
            frames.append(
                Frame(
                    sse({"type": "content_block_stop", "index": index}, "content_block_stop"), False
                )
            )
        if reply.stream_error:
            body = {
                "type": "error",
                "error": {"type": _error_type(reply.stream_error), "message": reply.message},
            }
            return [*frames, Frame(sse(body, "error"), False)]
        stop = {
            "type": "message_delta",
            "delta": {
                "stop_reason": _STOP.get(reply.finish_reason, reply.finish_reason),
                "stop_sequence": None,
            },
            "usage": {"output_tokens": tokens_out},
        }
        frames.append(Frame(sse(stop, "message_delta"), False))
        frames.append(Frame(sse({"type": "message_stop"}, "message_stop"), False))
        return frames

    def json_answer(self, reply: Reply, request: Recorded) -> Any:
        content: list[dict[str, Any]] = []
        if reply.reasoning:
            content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "fake"})
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for i, c in enumerate(reply.calls):
            content.append(
                {
                    "type": "tool_use",
                    "id": c.id or f"toolu_{i}_{len(self.requests)}",
                    "name": c.name,
                    "input": json.loads(c.arguments or "{}"),
                }
            )
        _, tokens_out = reply.usage
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "content": content,
            "model": (request.json or {}).get("model", ""),
            "stop_reason": _STOP.get(reply.finish_reason, reply.finish_reason),
            "usage": {**_input_usage(reply), "output_tokens": tokens_out},
        }


def _input_usage(reply: Reply) -> dict[str, int]:
    """As Anthropic reports a prompt: input_tokens is the part not read from the cache."""
    tokens_in, _ = reply.usage
    if not reply.cached:
        return {"input_tokens": tokens_in}
    return {"input_tokens": tokens_in - reply.cached, "cache_read_input_tokens": reply.cached}


def _error_type(status: int) -> str:
    return _ERROR_TYPE.get(status, "api_error")
