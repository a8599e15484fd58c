"""How many tokens a model holds: `models[].context_window`, else the built-in table of the
common models (the usage_update's `size`)."""

from __future__ import annotations

import re

from acp_memory.config.models import OFFLINE_MODEL_ID, ModelConfig

# Whole model ids first (the built-in offline model), then upstream ids, as the providers'
# own pages give them.
_BY_MODEL_ID = {OFFLINE_MODEL_ID: 32_768}
_BY_UPSTREAM_ID = {
    # OpenAI
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4-turbo": 128_000,
    "o1": 200_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    # Anthropic
    "claude-opus-4-5": 200_000,
    "claude-opus-4-1": 200_000,
    "claude-opus-4": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-3-5-haiku": 200_000,
}
# A dated snapshot holds what its model does: gpt-4o-2024-08-06, claude-sonnet-4-5-20250929,
# claude-3-5-haiku-latest.
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def context_window(model: ModelConfig) -> int | None:
    """The model's window in tokens: its configured one, else the table's; None when unknown."""
    if model.context_window is not None:
        return model.context_window
    if (known := _BY_MODEL_ID.get(model.model)) is not None:
        return known
    upstream = model.upstream_id.lower()
    return _BY_UPSTREAM_ID.get(upstream) or _BY_UPSTREAM_ID.get(_SNAPSHOT.sub("", upstream))
