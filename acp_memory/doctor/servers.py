"""`acp-memory doctor`'s checks of the MCP servers: each configured server as a line (nothing
started), the ${VAR}s its file entry leaves unset and, with --online, every server started to
count its tools."""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio

from acp_memory.config import Config
from acp_memory.config.loader import unset_variables
from acp_memory.doctor.findings import Finding
from acp_memory.mcpclient.configured import configured_specs, ignored_project_file
from acp_memory.mcpclient.specs import masked_url, unresolved_command
from acp_memory.memory.masking import masked_args


def mcp_findings(cfg: Config, cwd: Path) -> list[Finding]:
    """One line per configured MCP server (`<cwd>/.mcp.json`'s too, when mcp.project_file
    allows it): its transport and where it is, secrets masked (the values of env and headers
    never shown); an error for a stdio command that cannot be found (nothing is started)."""
    problems: list[str] = []
    specs = configured_specs(cfg, cwd, problems)
    found = [Finding("error", problem) for problem in problems]
    if ignored := ignored_project_file(cfg, cwd):
        found.append(
            Finding(
                "warning",
                f"{ignored} is ignored: its MCP servers start only with mcp.project_file: allow",
            )
        )
    for spec in specs:
        if spec.type == "stdio":
            where = _masked_command([spec.command, *spec.args])
            named = f"; env {', '.join(spec.env)}" if spec.env else ""
        else:
            where = masked_url(spec.url)
            named = f"; headers {', '.join(spec.headers)}" if spec.headers else ""
        line = f"MCP server {spec.name} ({spec.type}): {where}{named}"
        if problem := unresolved_command(spec, cwd):
            found.append(Finding("error", f"{line}; {problem}"))
        else:
            found.append(Finding("ok", line))
    return found


def mcp_unset_variables(raw: Mapping[str, Any]) -> list[Finding]:
    """A warning per `mcp.servers` entry of the file whose ${VAR}s are unset: each expands to
    nothing, so a header such as "Bearer ${TOKEN}" goes out without its token."""
    section = raw.get("mcp")
    servers = (
        section.get("servers", section.get("mcpServers")) if isinstance(section, Mapping) else None
    )
    if not isinstance(servers, Mapping):
        return []
    found = []
    for name, entry in servers.items():
        unset = sorted({v for text in _strings(entry, set()) for v in unset_variables(text)})
        if unset:
            names = ", ".join(f"${{{v}}}" for v in unset)
            unset_line = f"not set in the environment: {names} (each expands to nothing)"
            found.append(Finding("warning", f"MCP server {name}: {unset_line}"))
    return found


def _strings(node: Any, seen: set[int]) -> Iterator[str]:
    """The strings of a parsed YAML tree, each shared node (an alias) walked once."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, Mapping | list) and id(node) not in seen:
        seen.add(id(node))
        for item in node.values() if isinstance(node, Mapping) else node:
            yield from _strings(item, seen)


async def mcp_online_findings(cfg: Config, cwd: Path) -> list[Finding]:
    """Start every configured MCP server at once, as a session would, and count its tools; a
    server that does not start is one error naming it and why."""
    # Only here: a plain doctor run does not load the MCP SDK.
    from acp_memory.mcpclient.connection import ServerConnection

    connections = [
        ServerConnection(spec, cwd, cfg.mcp.startup_timeout_seconds)
        for spec in configured_specs(cfg, cwd, problems=[])  # mcp_findings named a problem
    ]
    async with anyio.create_task_group() as tg:
        for connection in connections:
            connection.start(tg)
        for connection in connections:
            await connection.settled.wait()
            connection.stop()
    found = []
    for c in connections:
        if c.started:
            tools = f"{len(c.tools)} tool{'' if len(c.tools) == 1 else 's'}"
            found.append(Finding("ok", f"MCP server {c.name} started: {tools}"))
        else:
            found.append(Finding("error", f"MCP server {c.name}: {c.failure}"))
    return found


def _masked_command(argv: list[str]) -> str:
    """The command line as a shell reads it, its credentials masked (a masked word unquoted)."""
    return " ".join(
        shown if shown != arg else shlex.quote(arg)
        for arg, shown in zip(argv, masked_args(argv), strict=True)
    )
