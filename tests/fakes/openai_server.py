"""A fake OpenAI-compatible server: POST /v1/chat/completions, SSE or JSON, scripted per test.

    async with FakeOpenAI() as server:          # http://127.0.0.1:<free port>/v1
        server.script(text("Hi", chunks=2), error(429, "slow down", retry_after=1))
        ...                                     # point api_base at server.base_url
        assert server.requests[0].json["model"] == "gpt-test"

See fakes.script for the replies and faults; the server records every request it received.
"""

from __future__ import annotations

from typing import Any

from .httpserver import FakeModelServer, Frame, Recorded, sse
from .script import Reply, split


class FakeOpenAI(FakeModelServer):
    path = "/v1/chat/completions"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def presented_key(self, request: Recorded) -> str:
        return request.headers.get("authorization", "").removeprefix("Bearer ")

    def error_body(self, reply: Reply) -> Any:
        kind = "rate_limit_exceeded" if reply.status == 429 else "api_error"
        return {"error": {"message": reply.message, "type": kind, "code": None}}

    def stream_frames(self, reply: Reply, request: Recorded) -> list[Frame]:
        model = (request.json or {}).get("model", "")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return sse(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [choice],
                }
            )

        deltas: list[dict[str, Any]] = [
            {"reasoning_content": p} for p in split(reply.reasoning, reply.chunks)
        ]
        deltas += [{"content": p} for p in split(reply.text, reply.chunks)]
        if deltas:  # the first delta names the role, as OpenAI's does
            deltas[0] = {"role": "assistant", **deltas[0]}
        frames = [Frame(chunk(d), True) for d in deltas]
        if reply.stream_error:
            error = {"message": reply.message, "type": "server_error", "code": reply.stream_error}
            return [*frames, Frame(sse({"error": error}), False)]
        for index, c in enumerate(reply.calls):
            call_id = c.id or f"call_{index}_{len(self.requests)}"
            head = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": ""},
            }
            frames.append(Frame(chunk({"tool_calls": [head]}), True))
            frames += [
                Frame(chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}), True)
                for p in split(c.arguments, c.chunks)
            ]
        frames.append(Frame(chunk({}, reply.finish_reason), False))
        if ((request.json or {}).get("stream_options") or {}).get("include_usage"):
            usage = sse(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [],
                    "usage": self._usage(reply),
                }
            )
            frames.append(Frame(usage, False))
        frames.append(Frame(sse("[DONE]"), False))
        return frames

    def json_answer(self, reply: Reply, request: Recorded) -> Any:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.calls:
            message["tool_calls"] = [
                {
                    "id": c.id or f"call_{i}_{len(self.requests)}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for i, c in enumerate(reply.calls)
            ]
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": (request.json or {}).get("model", ""),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": self._usage(reply),
        }

    @staticmethod
    def _usage(reply: Reply) -> dict[str, Any]:
        # As OpenAI reports it: the cached part is within prompt_tokens, told in its details.
        tokens_in, tokens_out = reply.usage
        return {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
            "prompt_tokens_details": {"cached_tokens": reply.cached},
        }
