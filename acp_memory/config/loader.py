"""Finding the home folder, reading config.yaml and expanding ${VAR} and ~ in it."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from dotenv import load_dotenv
from pydantic import ValidationError

from acp_memory.config.models import Config

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ConfigError(Exception):
    """The config file cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Paths:
    """Where things live for one run of the program."""

    home: Path
    config_file: Path
    sessions_dir: Path
    cwd: Path

    @property
    def env_file(self) -> Path:
        return self.home / ".env"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"


def resolve_paths(
    *,
    home: str | None = None,
    config: str | None = None,
    sessions_dir: str | None = None,
    cwd: str | None = None,
    cfg: Config | None = None,
) -> Paths:
    """The home is the flag, else $ACP_MEMORY_HOME, else ~/.acp-memory; the rest follow it."""
    home_dir = Path(expand(home or os.environ.get("ACP_MEMORY_HOME") or "~/.acp-memory")).absolute()
    configured_sessions = cfg.sessions.dir if cfg else ""
    sessions = sessions_dir or configured_sessions
    return Paths(
        home=home_dir,
        config_file=Path(expand(config)).absolute() if config else home_dir / "config.yaml",
        sessions_dir=Path(expand(sessions)).absolute() if sessions else home_dir / "sessions",
        cwd=Path(expand(cwd)).absolute() if cwd else Path.cwd(),
    )


def expand(value: str) -> str:
    """Expand ${VAR} (unset variables become empty) and a leading ~."""
    return os.path.expanduser(_VAR.sub(lambda m: os.environ.get(m.group(1), ""), value))


def _expand_tree(node: Any) -> Any:
    if isinstance(node, str):
        return expand(node)
    if isinstance(node, list):
        return [_expand_tree(v) for v in node]
    if isinstance(node, Mapping):
        return {k: _expand_tree(v) for k, v in node.items()}
    return node


def load_env_file(path: Path) -> None:
    """Load <home>/.env into os.environ for variables not already set; no file is fine.

    python-dotenv reads it as other tools do: quotes, escapes, `export` and inline comments.
    """
    try:
        load_dotenv(path, override=False)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc.reason}") from exc


def read_raw(path: Path) -> dict[str, Any] | None:
    """The YAML mapping in a config file, or None when the file does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        return parse_raw(text)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def parse_raw(text: str) -> dict[str, Any]:
    """The YAML mapping a config file's text holds ({} when it is empty)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("the top level must be a mapping of sections")
    return data


def parse_config(raw: Mapping[str, Any], source: Path) -> Config:
    """Validate a raw mapping; errors name every offending key."""
    try:
        return Config.model_validate(_expand_tree(raw))
    except ValidationError as exc:
        raise ConfigError(f"{source}: {describe_errors(exc)}") from None


def describe_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"{key}: {err['msg']}")
    return "; ".join(parts)


def load_config(paths: Paths, *, explicit: bool = False) -> Config:
    """Load the config at paths.config_file; built-in defaults when the default file is absent.

    A config-less run turns memory on, so a newcomer sees the whole machinery.
    """
    load_env_file(paths.env_file)
    raw = read_raw(paths.config_file)
    if raw is None:
        if explicit:
            raise ConfigError(f"{paths.config_file}: no such config file")
        cfg = Config()
        cfg.memory.enable = True
        return cfg
    return parse_config(raw, paths.config_file)


def unknown_keys(cfg: Config) -> list[str]:
    """Dotted names of keys that no model declares."""
    found: list[str] = []

    def walk(model: Any, prefix: str) -> None:
        for key in model.model_extra or {}:
            found.append(f"{prefix}{key}")
        for name in type(model).model_fields:
            value = getattr(model, name)
            items = value if isinstance(value, list) else [value]
            for i, item in enumerate(items):
                if hasattr(item, "model_extra"):
                    sub = f"{prefix}{name}[{i}]." if isinstance(value, list) else f"{prefix}{name}."
                    walk(item, sub)

    walk(cfg, "")
    return found
