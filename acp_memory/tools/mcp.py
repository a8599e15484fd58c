"""An MCP server's tools as the main agent's: `mcp__<server>__<tool>`, with the server's
description and input schema, each call through the permission gate, each result as the model
reads it (text) and as the editor shows it (text, images, resource links)."""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema
from mcp import types as mcp_types

from acp_memory.mcpclient.connection import CallFailed, ServerConnection
from acp_memory.mcpclient.names import tool_name
from acp_memory.tasks.log import clip
from acp_memory.tools.base import (
    ImageView,
    LinkView,
    PermissionRequest,
    ToolContent,
    ToolContext,
    ToolError,
    ToolKind,
    ToolResult,
)
from acp_memory.tools.registry import MODE_TOOLS

log = logging.getLogger(__name__)


class McpTool:
    """One tool of a running MCP server."""

    kind: ToolKind = "other"

    def __init__(self, server: ServerConnection, tool: mcp_types.Tool, name: str) -> None:
        self.server = server
        self.tool = tool
        self.name = name
        self.description = tool.description or tool.title or f"{tool.name} ({server.name})"
        self.parameters: Mapping[str, Any] = tool.input_schema
        hints = tool.annotations
        self.read_only = bool(hints is not None and hints.read_only_hint)

    def title(self, args: Mapping[str, Any]) -> str:
        return f"{self.server.name}: {self.tool.title or self.tool.name}"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        if ctx.permissions is not None:
            request = PermissionRequest("mcp", self.name, f"Call {self.name}", dict(args))
            await ctx.permissions.ensure(ctx, request)
        try:
            result = await self.server.call(self.tool.name, dict(args))
        except CallFailed as exc:
            raise ToolError(str(exc)) from None
        return tool_result(result, ctx.output_limit)


def mcp_tools(servers: Iterable[ServerConnection], mode: str) -> list[McpTool]:
    """The tools of the running servers that `mode` is offered (ask and plan: those annotated
    readOnlyHint alone), in server order; a tool whose name another took, or whose input
    schema is not one, is left out with a warning."""
    tools: list[McpTool] = []
    taken: set[str] = set()
    writes = MODE_TOOLS.get(mode, frozenset()) is None  # a mode offered every tool
    for server in servers:
        for tool in server.tools:
            adapter = McpTool(server, tool, tool_name(server.name, tool.name))
            if not writes and not adapter.read_only:
                continue
            if adapter.name in taken:
                log.warning("MCP server %s: tool %s left out: %s is taken",
                            server.name, tool.name, adapter.name)
                continue
            try:
                jsonschema.Draft202012Validator.check_schema(dict(tool.input_schema))
            except jsonschema.SchemaError as exc:
                log.warning("MCP server %s: tool %s left out: its input schema: %s",
                            server.name, tool.name, exc.message)
                continue
            taken.add(adapter.name)
            tools.append(adapter)
    return tools


def tool_result(result: mcp_types.CallToolResult, limit: int) -> ToolResult:
    """A tools/call result: its text for the model (images and other media named, a text
    resource's text given), the editor's images and resource links beside it."""
    lines: list[str] = []
    content: list[ToolContent] = []
    for block in result.content:
        match block:
            case mcp_types.TextContent():
                lines.append(block.text)
            case mcp_types.ImageContent():
                lines.append(f"[image: {block.mime_type}, {_size(block.data)} bytes]")
                content.append(ImageView(block.data, block.mime_type))
            case mcp_types.AudioContent():
                lines.append(f"[audio: {block.mime_type}, {_size(block.data)} bytes]")
            case mcp_types.ResourceLink():
                lines.append(f"[resource: {block.uri}]")
                content.append(LinkView(block.uri, block.name, block.mime_type))
            case mcp_types.EmbeddedResource():
                resource = block.resource
                uri = str(resource.uri)
                if isinstance(resource, mcp_types.TextResourceContents):
                    lines.append(f"[resource: {uri}]\n{resource.text}")
                else:
                    mime = resource.mime_type or "application/octet-stream"
                    lines.append(f"[resource: {uri}, {mime}, {_size(resource.blob)} bytes]")
                    content.append(LinkView(uri, uri.rsplit("/", 1)[-1] or uri, mime))
    if not lines and result.structured_content is not None:
        lines.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(lines) or ("(no output)" if not result.is_error else "the tool failed")
    if result.is_error:
        text = f"Error: {text}"
    return ToolResult(clip(text, limit), is_error=bool(result.is_error), content=content)


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)
