"""Finding the home folder, reading config.yaml and expanding ${VAR} and ~ in it."""

from __future__ import annotations

import json
import os
import re
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from dotenv import load_dotenv
from pydantic import ValidationError

from acp_memory.config.models import (
    AUTO_MODEL,
    OFFLINE_MODEL_ID,
    Config,
    McpConfig,
    McpServerConfig,
    ModelConfig,
    ProviderConfig,
)

VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Bounds on a config file, so that a hostile one (a YAML alias bomb, a nesting of thousands)
# is refused in one line rather than hanging or overflowing the stack of whoever reads it.
MAX_CONFIG_BYTES = 1024 * 1024
TOO_LARGE = "larger than 1 MiB; a config file is at most 1 MiB (1048576 bytes)"
MAX_ALIASES = 100
MAX_DEPTH = 50
# Claude Code's project file of MCP servers, read with mcp.project_file: allow.
PROJECT_MCP_FILE = ".mcp.json"
# With no config file, the first key found in the environment picks the provider and model.
NO_FILE_MODELS: tuple[tuple[str, Literal["openai", "anthropic"], str], ...] = (
    ("OPENAI_API_KEY", "openai", "openai/gpt-4.1-mini"),
    ("ANTHROPIC_API_KEY", "anthropic", "anthropic/claude-sonnet-4-5"),
)


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

    @property
    def history_dir(self) -> Path:
        """The notes' change journal, pending changes and read stamps (never in a root)."""
        return self.home / "history"


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
    return os.path.expanduser(VARIABLE.sub(lambda m: os.environ.get(m.group(1), ""), value))


def unset_variables(value: str) -> list[str]:
    """The names of the ${VAR}s in value that expand to nothing (unset or empty)."""
    return [name for name in VARIABLE.findall(value) if not os.environ.get(name)]


def _expand_tree(node: Any, done: dict[int, Any] | None = None) -> Any:
    # Each list or mapping is expanded once and shared again as YAML's aliases shared it:
    # walking every alias afresh would visit a bomb's billion nodes.
    done = {} if done is None else done
    if isinstance(node, str):
        return expand(node)
    if not isinstance(node, list | Mapping):
        return node
    if id(node) not in done:
        if isinstance(node, list):
            done[id(node)] = [_expand_tree(v, done) for v in node]
        else:
            done[id(node)] = {k: _expand_tree(v, done) for k, v in node.items()}
    return done[id(node)]


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


def _read_bounded(path: Path) -> bytes | None:
    """A config file's bytes within MAX_CONFIG_BYTES, or None when it does not exist."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_CONFIG_BYTES + 1)  # never more than the bound in memory
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    if len(data) > MAX_CONFIG_BYTES:
        # Before decoding: the cut may fall inside a character, which is no encoding error.
        raise ConfigError(f"{path}: {TOO_LARGE}")
    return data


def read_raw(path: Path) -> dict[str, Any] | None:
    """The YAML mapping in a config file, or None when the file does not exist."""
    if (data := _read_bounded(path)) is None:
        return None
    try:
        return parse_raw(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc.reason}") from None
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def parse_raw(text: str) -> dict[str, Any]:
    """The YAML mapping a config file's text holds ({} when it is empty), within the bounds
    on its size, aliases and depth."""
    if len(text.encode("utf-8")) > MAX_CONFIG_BYTES:
        raise ConfigError(TOO_LARGE)
    try:
        data = yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader, bounded
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = _one_line(exc.problem or exc.context)
        raise ConfigError(f"not valid YAML{where}: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {_one_line(str(exc))}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("the top level must be a mapping of sections")
    return data


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing more than MAX_ALIASES aliases, nesting past MAX_DEPTH
    (an alias counts as deep as the node it names) and an alias inside its own node."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._open = 0  # collections being composed around the current node
        self._heights: dict[int, int] = {}  # a composed node's collection levels

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise ConfigError(
                    f"more than {MAX_ALIASES} YAML aliases (*{event.anchor} at line "
                    f"{event.start_mark.line + 1}); a config file may use at most {MAX_ALIASES}"
                )
            node = super().compose_node(parent, index)
            if id(node) not in self._heights:
                raise ConfigError(
                    f"the YAML alias *{event.anchor} at line {event.start_mark.line + 1} is "
                    "inside the node it names"
                )
            self._check_depth(self._open + self._heights[id(node)], event.start_mark)
            return node
        start = self.peek_event()
        collection = not self.check_event(yaml.ScalarEvent)
        if collection:
            self._open += 1
            self._check_depth(self._open, start.start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._open -= collection
        self._heights[id(node)] = _height(node, self._heights)
        return node

    def _check_depth(self, depth: int, mark: yaml.Mark) -> None:
        if depth > MAX_DEPTH:
            raise ConfigError(
                f"nested deeper than {MAX_DEPTH} levels (line {mark.line + 1}); a config file "
                f"may nest at most {MAX_DEPTH}"
            )


def _height(node: yaml.Node | None, heights: dict[int, int]) -> int:
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [child for pair in node.value for child in pair]
    else:
        return 0
    return 1 + max((heights[id(child)] for child in children), default=0)


def parse_config(raw: Mapping[str, Any], source: Path) -> Config:
    """Validate a raw mapping; errors name every offending key."""
    try:
        cfg = Config.model_validate(_expand_tree(raw))
    except ValidationError as exc:
        raise ConfigError(f"{source}: {describe_errors(exc)}") from None
    if cfg.agent.model.strip() == AUTO_MODEL:
        pick_auto_model(cfg)
    if not cfg.memory.shared.dsn:
        # An unset ${VAR} turns shared memory off, which a start must say rather than keep
        # the team's notes on this machine in silence.
        cfg.memory.shared._unset_variables = _unset_in(raw, ("memory", "shared", "dsn"))
    return cfg


def _unset_in(raw: Mapping[str, Any], keys: tuple[str, ...]) -> list[str]:
    """The unset ${VAR}s of the raw text at a dotted place of the file ([] when absent)."""
    node: Any = raw
    for key in keys:
        node = node.get(key) if isinstance(node, Mapping) else None
    return unset_variables(node) if isinstance(node, str) else []


# Pydantic names its model class when a section is not a mapping; the user knows the key.
_NOT_A_MAPPING = {"model_type", "model_attributes_type", "dict_type"}
# What the user wrote, shown by its start only: a value shared by YAML aliases may hold
# billions of nodes, which a full repr would walk.
MAX_ERRORS_SHOWN = 5
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxstring = 1, 3, 3, 40


def describe_errors(exc: ValidationError) -> str:
    """The errors of a validation as `key: what is wrong`, on one line (the first
    MAX_ERRORS_SHOWN, then how many more)."""
    parts = []
    errors = exc.errors()
    for err in errors[:MAX_ERRORS_SHOWN]:
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] in _NOT_A_MAPPING:
            got = _one_line(_SHORT.repr(err["input"]))
            msg = f"must be a mapping of keys (key: value), not {got}"
        else:
            msg = _one_line(err["msg"])
        parts.append(f"{key}: {msg}")
    if len(errors) > MAX_ERRORS_SHOWN:
        parts.append(f"and {len(errors) - MAX_ERRORS_SHOWN} more")
    return "; ".join(parts)


def read_project_mcp(cwd: Path) -> dict[str, McpServerConfig] | None:
    """The servers of `<cwd>/.mcp.json` (its mcpServers, as mcp.servers entries, ${VAR}
    expanded), or None when there is no such file; a ConfigError names the file and what is
    wrong with it."""
    path = cwd / PROJECT_MCP_FILE
    if (data := _read_bounded(path)) is None:
        return None
    try:
        raw = json.loads(data)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc.reason}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be an object with mcpServers")
    try:
        section = McpConfig.model_validate({"mcpServers": _expand_tree(raw.get("mcpServers", {}))})
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe_errors(exc)}") from None
    return section.servers


def load_config(paths: Paths, *, explicit: bool = False) -> Config:
    """Load the config at paths.config_file; built-in defaults when the default file is absent.

    A config-less run turns memory on, so a newcomer sees the whole machinery.
    """
    load_env_file(paths.env_file)
    raw = read_raw(paths.config_file)
    if raw is None:
        if explicit:
            raise ConfigError(f"{paths.config_file}: no such config file")
        return no_file_config(paths.config_file)
    return parse_config(raw, paths.config_file)


def no_file_config(config_file: Path) -> Config:
    """The config of a run with no config file: memory on, and the model agent.model: auto
    picks (pick_auto_model)."""
    cfg = Config()
    cfg.memory.enable = True
    cfg.agent.model = AUTO_MODEL
    why = pick_auto_model(cfg)
    model = cfg.agent.model
    cfg._no_file_note = f"no config file at {config_file}: sessions run on {model} ({why})"
    return cfg


def pick_auto_model(cfg: Config) -> str:
    """agent.model: auto set to the model of the first provider whose key is in the
    environment (NO_FILE_MODELS), that provider and model added when the config lacks them,
    else to the offline model; returns why."""
    for variable, provider, model in NO_FILE_MODELS:
        if os.environ.get(variable):
            # The key stays in the environment: the provider reads it from there.
            if cfg.find_provider(provider) is None:
                cfg.providers.append(ProviderConfig(name=provider, type=provider))
            if all(m.model != model for m in cfg.models):
                cfg.models.append(ModelConfig(model=model))
            cfg.agent.model = model
            why = f"{variable} is set"
            break
    else:
        cfg.agent.model = OFFLINE_MODEL_ID
        why = "the built-in offline model; set OPENAI_API_KEY or ANTHROPIC_API_KEY for another"
    cfg._auto_why = why
    return why


def unknown_keys(cfg: Config) -> list[str]:
    """Dotted names of keys that no model declares."""
    found: list[str] = []

    def walk(model: Any, prefix: str) -> None:
        for key in model.model_extra or {}:
            found.append(f"{prefix}{key}")
        for name in type(model).model_fields:
            value = getattr(model, name)
            if isinstance(value, dict):  # sections keyed by a name the user chose: mcp.servers
                for key, item in value.items():
                    if hasattr(item, "model_extra"):
                        walk(item, f"{prefix}{name}.{key}.")
                continue
            items = value if isinstance(value, list) else [value]
            for i, item in enumerate(items):
                if hasattr(item, "model_extra"):
                    sub = f"{prefix}{name}[{i}]." if isinstance(value, list) else f"{prefix}{name}."
                    walk(item, sub)

    walk(cfg, "")
    return found
