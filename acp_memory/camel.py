"""The one base for JSON shapes that are camelCase on the wire and on disk."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class CamelModel(BaseModel):
    """camelCase outside, snake_case in Python; unknown keys (such as _meta) are kept."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    def dump(self) -> dict[str, Any]:
        """JSON-ready data with camelCase keys and no nulls."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
