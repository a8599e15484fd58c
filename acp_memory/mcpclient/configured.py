"""The servers every session gets besides the editor's: config.yaml's `mcp.servers`, and with
`mcp.project_file: allow` the project's `<cwd>/.mcp.json` (Claude Code's file) over them."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from acp_memory.config import Config, ConfigError
from acp_memory.config.loader import PROJECT_MCP_FILE, read_project_mcp
from acp_memory.config.models import McpServerConfig
from acp_memory.mcpclient.specs import ServerSpec, merged

log = logging.getLogger(__name__)


def specs_from_config(cfg: Config) -> list[ServerSpec]:
    """The configured servers in the file's order (the models validated each entry)."""
    return _specs(cfg.mcp.servers)


def project_specs(cfg: Config, cwd: Path) -> list[ServerSpec]:
    """`<cwd>/.mcp.json`'s servers when mcp.project_file allows them (none otherwise, or
    without the file); ConfigError when the file cannot be used."""
    if cfg.mcp.project_file != "allow":
        return []
    return _specs(read_project_mcp(cwd) or {})


def configured_specs(
    cfg: Config, cwd: Path, problems: list[str] | None = None
) -> list[ServerSpec]:
    """A session's servers in `cwd` besides the editor's: the project file's, then the
    config's of other names. A project file that cannot be used is left out, its problem
    added to `problems` (doctor's) or else logged as a warning."""
    try:
        project = project_specs(cfg, cwd)
    except ConfigError as exc:
        problem = f"{exc} (its MCP servers are left out)"
        if problems is None:
            log.warning("%s", problem)
        else:
            problems.append(problem)
        project = []
    return merged(project, specs_from_config(cfg))


def ignored_project_file(cfg: Config, cwd: Path) -> Path | None:
    """`<cwd>/.mcp.json` when there is one and mcp.project_file leaves it out."""
    path = cwd / PROJECT_MCP_FILE
    return path if cfg.mcp.project_file != "allow" and path.is_file() else None


def _specs(entries: Mapping[str, McpServerConfig]) -> list[ServerSpec]:
    return [
        ServerSpec(
            name,
            entry.transport,
            command=entry.command,
            args=tuple(entry.args),
            env=dict(entry.env),
            url=entry.url,
            headers=dict(entry.headers),
        )
        for name, entry in entries.items()
    ]
