"""What an inbound message is: a response to one of ours, a valid request, or why it is not."""

from __future__ import annotations

import math
from typing import Any

_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})


def error_response(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    """The error object answering the request `msg_id`."""
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def is_response(message: Any) -> bool:
    """Whether `message` answers a request (it has a result or an error, and no method)."""
    return (
        isinstance(message, dict)
        and "method" not in message
        and ("result" in message or "error" in message)
    )


def readable_id(message: Any) -> Any:
    """The id to answer an invalid request with: its own when it is a valid id, else null."""
    if isinstance(message, dict):
        msg_id = message.get("id")
        if _valid_id(msg_id):
            return msg_id
    return None


def request_problem(message: Any) -> str | None:
    """Why a message is not a valid request object, or None when it is one.

    The same rules as jsonrpcserver's schema, checked here because its refusal answers with
    a null id even when the request's own id is readable, and a client correlating by id
    would then wait forever.
    """
    if not isinstance(message, dict):
        return "Invalid request: not a request object"
    if message.get("jsonrpc") != "2.0":
        return 'Invalid request: "jsonrpc" must be "2.0"'
    if not isinstance(message.get("method"), str):
        return 'Invalid request: "method" must be a string'
    if "id" in message and not _valid_id(message["id"]):
        return 'Invalid request: "id" must be a string, a number or null'
    if "params" in message and not isinstance(message["params"], dict | list):
        return 'Invalid request: "params" must be an object or an array'
    unknown = message.keys() - _REQUEST_KEYS
    if unknown:
        return f"Invalid request: unexpected member {sorted(unknown)[0]!r}"
    return None


def _valid_id(value: Any) -> bool:
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):  # a bool is an int to Python, not a number to JSON
        return False
    if isinstance(value, int):
        return True
    # NaN and Infinity parse, but have no JSON spelling to echo them back in.
    return isinstance(value, float) and math.isfinite(value)
