"""What `memory.shared` earns when a process starts, said once by every surface and by doctor:
a DSN that does not parse (a config error), an unset `${VAR}` that turned shared memory off,
a remote host reached with an sslmode weaker than `require`."""

from __future__ import annotations

from acp_memory.config import Config
from acp_memory.memory.shared.dsn import dsn_warnings


def unset_dsn_warning(cfg: Config) -> str | None:
    """The one line for a dsn that expanded to "" because its ${VAR} is unset, or None."""
    if cfg.memory.shared.dsn or not (unset := cfg.memory.shared.unset_variables()):
        return None
    names = ", ".join(f"${{{name}}}" for name in unset)
    verb = "is" if len(unset) == 1 else "are"
    return f"memory.shared.dsn: {names} {verb} not set; shared project memory is off"


def shared_config_warnings(cfg: Config) -> list[str]:
    """The warnings memory.shared earns at start ([] when it is off and meant to be); a DSN
    that does not parse raises DsnError, whose one line names the key and the masked DSN."""
    if (unset := unset_dsn_warning(cfg)) is not None:
        return [unset]
    return dsn_warnings(cfg.memory.shared.dsn) if cfg.memory.shared.dsn else []
