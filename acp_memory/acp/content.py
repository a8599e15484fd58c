"""Turning an ACP prompt (a list of content blocks) into the text of a user message."""

from __future__ import annotations

from acp.schema import (
    AudioContentBlock,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from acp_memory.jsonrpc.errors import INVALID_PARAMS, RpcError

PromptBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)


def prompt_text(blocks: list[PromptBlock]) -> str:
    """Text, links and embedded text resources, in order; media we did not offer is refused."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"[{block.name}]({block.uri})")
        elif isinstance(block, EmbeddedResourceContentBlock):
            res = block.resource
            if isinstance(res, TextResourceContents):
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
