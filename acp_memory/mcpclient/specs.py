"""What starts one MCP server: the editor's `mcpServers` entries and config.yaml's `mcp.servers`
both come down to a ServerSpec."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

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


# What stands for a credential wherever a server is shown or kept (doctor, session.json, logs).
MASK = "***"
_URL = re.compile(r"\bhttps?://[^\s'\"<>]+", re.I)


def masked_url(url: str) -> str:
    """The URL without its query's values, where tokens travel, nor its password."""
    try:
        parts = urlsplit(url)
    except ValueError:  # no URL after all (a broken IPv6 host): nothing of it is shown
        return MASK
    query = "&".join(
        f"{name}={MASK}" if eq else name
        for name, eq, _ in (item.partition("=") for item in parts.query.split("&") if item)
    )
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:{MASK}@{host}"
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def masked_urls(text: str) -> str:
    """text with each URL in it masked: an HTTP error or a log line names the URL it used."""
    return _URL.sub(lambda found: masked_url(found.group()), text) if "://" in text else text


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


def unresolved_command(spec: ServerSpec, cwd: Path) -> str | None:
    """Why a stdio server's command cannot be run, found without running it, or None: a
    bare name is looked up on the PATH the server gets, a path from the server's cwd."""
    if spec.type != "stdio":
        return None
    command = spec.command
    if os.sep not in command:
        search = spec.env.get("PATH", os.environ.get("PATH", os.defpath))
        return None if shutil.which(command, path=search) else f"cannot run {command}: not on PATH"
    target = cwd / command  # an absolute command stays itself
    if not target.is_file():
        return f"cannot run {command}: no such file"
    return None if os.access(target, os.X_OK) else f"cannot run {command}: not executable"


def merged(first: Sequence[ServerSpec], then: Sequence[ServerSpec]) -> list[ServerSpec]:
    """The first servers, then those of `then` whose names the first did not use: the
    editor's server wins over the project file's of the same name, which wins over the
    config's."""
    taken = {s.name for s in first}
    return [*first, *(s for s in then if s.name not in taken)]
