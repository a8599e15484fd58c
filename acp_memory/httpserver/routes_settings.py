"""/coddy/settings/memory: the memory keys of the config file, read and written in place.

A write is validated as the next start would read the file (the same pydantic models, `${VAR}`
expanded) before anything reaches the disk, and only the keys that change are rewritten, so
the file keeps its comments, order and `${VAR}` references (config/edit.py). With no file yet
the first write creates one that keeps what the config-less run had: memory on. A saved
change reaches the running server too, from the next turn on.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any, Literal, get_args

import anyio
from fastapi import APIRouter
from pydantic import Field, JsonValue

from acp_memory.atomic import write_atomic
from acp_memory.camel import CamelModel
from acp_memory.config import Config, ConfigError
from acp_memory.config.edit import ConfigEditError, same_value, set_keys
from acp_memory.config.loader import parse_config, parse_raw
from acp_memory.config.models import MemoryConfig
from acp_memory.httpserver.agent import HttpAgent
from acp_memory.httpserver.errors import ApiError
from acp_memory.httpserver.models import Request

MemoryKey = Literal[
    "enable",
    "model",
    "fallback_models",
    "wait_seconds",
    "timeout_seconds",
    "keep_runs",
    "additional_prompt",
    "additional_prompt_max_chars",
]
MEMORY_KEYS: tuple[str, ...] = get_args(MemoryKey)
NEW_FILE = (
    "# acp-memory configuration; config.example.yaml documents every key.\n"
    "# Created by Settings in the web page, keeping what the config-less run had: memory on.\n"
)


class MemorySettings(CamelModel):
    object: Literal["memory_settings"] = "memory_settings"
    config_file: str
    exists: bool = Field(description="false until a first save creates the file")
    revision: str = Field(
        description="a digest of the file as read ('' with no file): send it back with a change"
    )
    values: dict[str, Any] = Field(
        description="each memory key as the file writes it (${VAR} references unexpanded), "
        "its default where the file does not set it"
    )
    models: list[str] = Field(description="the configured model ids")


class MemorySettingsChange(Request):
    values: dict[MemoryKey, JsonValue] = Field(description="the keys to set; others are kept")
    revision: str | None = Field(
        default=None, description="the revision read; a file changed since then is a 409"
    )


def settings_routes(agent: HttpAgent) -> APIRouter:
    router = APIRouter(prefix="/coddy/settings", tags=["settings"])
    path = agent.paths.config_file
    writing = anyio.Lock()

    @router.get("/memory")
    async def read_settings() -> MemorySettings:
        """The memory keys of the config file (the config-less defaults, memory on, before
        there is one)."""
        text, revision = await anyio.to_thread.run_sync(_read, path)
        return _settings(path, text, revision, agent.cfg)

    @router.put("/memory")
    async def write_settings(change: MemorySettingsChange) -> MemorySettings:
        """Set memory keys in the config file, in place; 400 naming the key for a bad value,
        409 when the file changed since `revision` was read."""
        async with writing:
            text, revision = await anyio.to_thread.run_sync(_read, path)
            if change.revision is not None and change.revision != revision:
                raise ApiError(
                    409, f"{path} changed since the settings were read; reload them first"
                )
            # A key the file leaves out stays out while it is asked at its default.
            section, base = _section(path, text), _defaults(text)
            values: dict[str, Any] = {
                key: value
                for key, value in change.values.items()
                if key in section or not same_value(getattr(base, key), value)
            }
            try:
                if text is None:
                    new_text = set_keys(NEW_FILE, "memory", {"enable": True, **values})
                else:
                    new_text = set_keys(text, "memory", values)
            except ConfigEditError as exc:
                raise ApiError(400, f"{path}: {exc}") from None
            cfg = _validated(path, new_text)
            if new_text != text:
                await anyio.to_thread.run_sync(_write, path, new_text)
                revision = _digest(new_text)
            # From the next turn on; what a run already started with stays as it was.
            agent.cfg.memory = agent.cfg.memory.model_copy(
                update={key: getattr(cfg.memory, key) for key in MEMORY_KEYS}
            )
        return _settings(path, new_text, revision, cfg)

    return router


def _settings(path: Path, text: str | None, revision: str, cfg: Config) -> MemorySettings:
    section, base = _section(path, text), _defaults(text)
    return MemorySettings(
        config_file=str(path),
        exists=text is not None,
        revision=revision,
        values={key: section.get(key, getattr(base, key)) for key in MEMORY_KEYS},
        models=cfg.model_ids(),
    )


def _section(path: Path, text: str | None) -> dict[str, Any]:
    """The file's memory mapping as written (empty when it has none)."""
    try:
        section = parse_raw(text).get("memory") if text else None
    except ConfigError as exc:
        raise ApiError(500, f"{path}: {exc}") from None
    return section if isinstance(section, dict) else {}


def _defaults(text: str | None) -> MemoryConfig:
    """What a key the file leaves out means: the defaults, memory on when there is no file."""
    return MemoryConfig(enable=text is None)


def _validated(path: Path, text: str) -> Config:
    """The config the edited text holds, refused as the next start would refuse it; a model
    the memory keys name must be a configured one."""
    try:
        cfg = parse_config(parse_raw(text), path)
    except ConfigError as exc:
        raise ApiError(400, str(exc)) from None
    ids = cfg.model_ids()
    named = [("memory.model", cfg.memory.model)]
    named += [(f"memory.fallback_models[{i}]", m) for i, m in enumerate(cfg.memory.fallback_models)]
    for key, model_id in named:
        if model_id.strip() and model_id.strip() not in ids:
            raise ApiError(
                400, f"{key}: {model_id!r} is not a configured model; use one of {', '.join(ids)}"
            )
    return cfg


def _read(path: Path) -> tuple[str | None, str]:
    """The file's text (None when there is none) and its revision."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None, ""
    except OSError as exc:
        raise ApiError(500, f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ApiError(500, f"{path} is not UTF-8 text: {exc.reason}") from None
    return text, _digest(text)


def _write(path: Path, text: str) -> None:
    # Through a symlink (a dotfiles checkout), to the file it names; with the mode it had.
    target = path.resolve()
    try:
        mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else None
        write_atomic(target, text.encode("utf-8"))
        if mode is not None:
            os.chmod(target, mode)
    except OSError as exc:
        raise ApiError(500, f"cannot write {path}: {exc.strerror or exc}") from None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
