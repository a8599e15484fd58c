"""Configuration: pydantic models, YAML loading and the doctor's findings."""

from acp_memory.config.loader import ConfigError, Paths, load_config, resolve_paths
from acp_memory.config.models import Config

__all__ = ["Config", "ConfigError", "Paths", "load_config", "resolve_paths"]
