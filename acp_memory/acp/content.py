"""Turning an ACP prompt (a list of content blocks) into the text of a user message."""

from __future__ import annotations

from acp_memory.acp.schema import (
    ContentBlock,
    EmbeddedResourceBlock,
    ResourceLinkBlock,
    TextBlock,
)
from acp_memory.jsonrpc.errors import INVALID_PARAMS, RpcError


def prompt_text(blocks: list[ContentBlock]) -> str:
    """Text, links and embedded text resources, in order; media we did not offer is refused."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceLinkBlock):
            parts.append(f"[{block.name}]({block.uri})")
        elif isinstance(block, EmbeddedResourceBlock):
            res = block.resource
            if res.text is not None:
                parts.append(f'<resource uri="{res.uri}">\n{res.text}\n</resource>')
            else:
                parts.append(f"[binary resource {res.uri} omitted]")
        else:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: prompt: {block.type} content is not supported "
                "(promptCapabilities.image and .audio are false)",
            )
    return "\n\n".join(parts)
