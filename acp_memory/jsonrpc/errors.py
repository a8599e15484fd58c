"""JSON-RPC error codes, and the exception handlers raise to answer with one."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# The peer cancelled the request ($/cancel_request), as LSP numbers it.
REQUEST_CANCELLED = -32800


class RpcError(Exception):
    """Raised by a handler (or returned by a peer) to answer a request with an error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
