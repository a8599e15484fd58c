"""Validating request params into wire models, with errors that name the field."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from acp_memory.jsonrpc.errors import INVALID_PARAMS, RpcError

M = TypeVar("M", bound=BaseModel)


def parse_params(model: type[M], params: dict[str, Any]) -> M:
    """Validate request params; a failure is -32602 whose message names the field."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "params"
            problems.append(f"{field}: {err['msg']}")
        raise RpcError(INVALID_PARAMS, "Invalid params: " + "; ".join(problems)) from None
