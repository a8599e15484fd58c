"""Turning an ACP prompt (a list of content blocks) into the user message a turn takes."""

from __future__ import annotations

import binascii
from base64 import b64decode

from acp_memory.acp.schema import (
    ContentBlock,
    EmbeddedResourceBlock,
    MediaBlock,
    ResourceLinkBlock,
    TextBlock,
)
from acp_memory.jsonrpc.errors import INVALID_PARAMS, RpcError
from acp_memory.sessions.model import ImagePart, PromptPart, TextPart, prompt_text


def prompt_parts(blocks: list[ContentBlock]) -> list[PromptPart]:
    """Text, links and embedded text resources as text, images as images, in order; audio
    (which we did not offer) and an image whose data is not base64 are refused."""
    parts: list[PromptPart] = []
    for index, block in enumerate(blocks):
        if isinstance(block, TextBlock):
            parts.append(TextPart(text=block.text))
        elif isinstance(block, ResourceLinkBlock):
            parts.append(TextPart(text=f"[{block.name}]({block.uri})"))
        elif isinstance(block, EmbeddedResourceBlock):
            res = block.resource
            if res.text is not None:
                text = f'<resource uri="{res.uri}">\n{res.text}\n</resource>'
            else:
                text = f"[binary resource {res.uri} omitted]"
            parts.append(TextPart(text=text))
        elif block.type == "image":
            parts.append(_image(index, block))
        else:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: prompt: {block.type} content is not supported "
                "(promptCapabilities.audio is false)",
            )
    return parts


def prompt_input(blocks: list[ContentBlock]) -> str | list[PromptPart]:
    """What the runner takes: the prompt's text, or its parts when it holds an image."""
    parts = prompt_parts(blocks)
    return parts if any(isinstance(p, ImagePart) for p in parts) else prompt_text(parts)


def _image(index: int, block: MediaBlock) -> ImagePart:
    where = f"Invalid params: prompt[{index}]"
    if not block.mime_type.startswith("image/"):
        raise RpcError(INVALID_PARAMS, f"{where}.mimeType: {block.mime_type!r} is not an image")
    try:
        b64decode(block.data, validate=True)
    except (binascii.Error, ValueError):
        raise RpcError(INVALID_PARAMS, f"{where}.data: not base64") from None
    return ImagePart(data=block.data, mime_type=block.mime_type)
