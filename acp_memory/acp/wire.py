"""ACP wire shapes: the SDK's generated models in, plain JSON out, and param validation."""

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


def dump(model: BaseModel) -> dict[str, Any]:
    """A wire model as JSON-ready data with camelCase keys and no nulls."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
