"""Validating request params into wire models, with errors that name the field."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from acp_memory.jsonrpc.errors import INVALID_PARAMS, RpcError

M = TypeVar("M", bound=BaseModel)


def parse_params(model: type[M], params: dict[str, Any]) -> M:
    """Validate request params; a failure is -32602 whose message names the field."""
    try:
        return model.model_validate(_scrub(params))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "params"
            problems.append(f"{field}: {err['msg']}")
        raise RpcError(INVALID_PARAMS, "Invalid params: " + "; ".join(problems)) from None


def _scrub(value: Any) -> Any:
    """Replace lone surrogates (legal in JSON text, not in UTF-8) with U+FFFD.

    Past this point every string can be written to a bundle, a note or the wire.
    """
    if isinstance(value, str):
        if value.isascii():
            return value
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value
