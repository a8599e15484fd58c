"""What starts one MCP server: the editor's `mcpServers` entries and config.yaml's `mcp.servers`
both come down to a ServerSpec."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Transport = Literal["stdio", "http", "sse"]


@dataclass(frozen=True)
class ServerSpec:
    """One MCP server: a command to run (stdio) or a URL to reach (http: streamable HTTP, sse)."""

    name: str
    type: Transport = "stdio"
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)


class BadServerSpec(ValueError):
    """An mcpServers entry that names no way to start its server; the message says which."""


def _pairs(items: Any, what: str, name: str) -> dict[str, str]:
    """ACP's `[{name, value}]` list as a mapping."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise BadServerSpec(f"MCP server {name}: {what} must be a list of {{name, value}}")
    out: dict[str, str] = {}
    for item in items:
        if not (isinstance(item, dict) and isinstance(item.get("name"), str)):
            raise BadServerSpec(f"MCP server {name}: each of {what} needs a name and a value")
        out[item["name"]] = str(item.get("value", ""))
    return out


def spec_from_acp(server: Mapping[str, Any]) -> ServerSpec:
    """One ACP `McpServer` (stdio: command, args, env; http or sse: url, headers) as a spec."""
    name = server.get("name")
    if not isinstance(name, str) or not name:
        raise BadServerSpec("an MCP server needs a name")
    kind = server.get("type", "stdio")
    if kind in ("http", "sse"):
        url = server.get("url")
        if not isinstance(url, str) or not url:
            raise BadServerSpec(f"MCP server {name}: type {kind} needs a url")
        headers = _pairs(server.get("headers"), "headers", name)
        return ServerSpec(name, kind, url=url, headers=headers)
    if kind != "stdio":
        raise BadServerSpec(f"MCP server {name}: unknown type {kind!r} (stdio, http or sse)")
    command = server.get("command")
    if not isinstance(command, str) or not command:
        raise BadServerSpec(f"MCP server {name}: a stdio server needs a command")
    args = server.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise BadServerSpec(f"MCP server {name}: args must be a list of strings")
    return ServerSpec(
        name, "stdio", command=command, args=tuple(args), env=_pairs(server.get("env"), "env", name)
    )


def specs_from_acp(servers: Iterable[Mapping[str, Any]]) -> list[ServerSpec]:
    """The editor's `mcpServers` as specs, in order (BadServerSpec names the first bad one)."""
    return [spec_from_acp(s) for s in servers]


def merged(editor: Sequence[ServerSpec], configured: Sequence[ServerSpec]) -> list[ServerSpec]:
    """The editor's servers, then the config's whose names the editor did not use: an
    editor's server wins over an `mcp.servers` entry of the same name."""
    taken = {s.name for s in editor}
    return [*editor, *(s for s in configured if s.name not in taken)]
