"""config.yaml's `mcp.servers` as ServerSpecs: the servers every session of every surface gets."""

from __future__ import annotations

from acp_memory.config import Config
from acp_memory.mcpclient.specs import ServerSpec


def specs_from_config(cfg: Config) -> list[ServerSpec]:
    """The configured servers in the file's order (the models validated each entry)."""
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
        for name, entry in cfg.mcp.servers.items()
    ]
