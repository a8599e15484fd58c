"""Every error of the API as JSON, `{"error": {"message", "type"}}`, with its status."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

# The error's `type`, by status: the names OpenAI's API uses, so its clients read them.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "request_too_large",
    502: "model_error",
    503: "unavailable_error",
}


class ApiError(Exception):
    """A refused request: its status and the one line its caller reads."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_body(status: int, message: str) -> dict[str, Any]:
    """The JSON body of an error answer."""
    return {"error": {"message": message, "type": ERROR_TYPES.get(status, "server_error")}}


def error_response(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """An error answer."""
    return JSONResponse(error_body(status, message), status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Our errors, Starlette's (unknown route, wrong method, body too large) and malformed
    requests all answer in the one shape."""

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.message)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        message = {404: f"no route {request.url.path}",
                   405: f"{request.method} is not allowed on {request.url.path}"}
        return error_response(
            exc.status_code, message.get(exc.status_code, str(exc.detail)), exc.headers
        )

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(400, describe_validation(exc.errors()))

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # A bug: the server's log gets the traceback (Starlette re-raises), the client one line.
        return error_response(500, f"internal error: {type(exc).__name__}: {exc}")

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(Exception, unexpected)


def describe_validation(errors: Any) -> str:
    """The first problem of a malformed request, naming where it is."""
    err = next(iter(errors), None)
    if err is None:
        return "invalid request"
    source, *field = [str(p) for p in err.get("loc", ())] or ["request"]
    msg = err.get("msg", "invalid")
    if err.get("type") == "json_invalid":
        why = str((err.get("ctx") or {}).get("error", "not valid JSON"))
        if field:
            # json's "Unterminated string starting at" ends where the position goes.
            why = f"{why.removesuffix(' at')} at character {field[0]}"
        return f"malformed JSON in the request body: {why}"
    if source == "body" and not field and isinstance(err.get("input"), bytes):
        # A body that was not parsed as JSON: its Content-Type said it is something else.
        return "the request body must be JSON, sent with Content-Type: application/json"
    if source == "body":
        return f"request body: {'.'.join(field)}: {msg}" if field else f"request body: {msg}"
    return f"{source} parameter {'.'.join(field)}: {msg}"
