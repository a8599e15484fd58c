"""Which hooks are configured: config.yaml's `hooks:`, plus `<cwd>/.acp-memory/hooks.yaml`
when `hooks_allow_project` is true, and which of them an event (and a tool name) selects."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import anyio
from pydantic import ValidationError

from acp_memory.config import Config
from acp_memory.config.loader import ConfigError, describe_errors, read_raw
from acp_memory.config.models import HookCommand, HooksConfig

log = logging.getLogger(__name__)

PROJECT_FILE = Path(".acp-memory") / "hooks.yaml"
EVENTS = tuple(HooksConfig.model_fields)


@dataclass(frozen=True)
class HookTable:
    """The configured hooks, config.yaml's first, then the project's."""

    sources: tuple[HooksConfig, ...]

    def commands(self, event: str, tool_name: str | None = None) -> list[HookCommand]:
        """The hooks an event runs, in order, each command once; `tool_name` (tool events
        only) must match a group's matcher."""
        found: dict[str, HookCommand] = {}
        for source in self.sources:
            for group in getattr(source, event):
                if tool_name is None or _matches(group.matcher, tool_name):
                    for hook in group.hooks:
                        found.setdefault(hook.command, hook)
        return list(found.values())

    def __bool__(self) -> bool:
        return any(getattr(s, event) for s in self.sources for event in EVENTS)


def _matches(matcher: str, tool_name: str) -> bool:
    return matcher in ("", "*") or re.fullmatch(matcher, tool_name) is not None


async def load_table(cfg: Config, cwd: Path) -> HookTable | None:
    """The hooks for a session in `cwd`, or None when there are none."""
    sources = [cfg.hooks]
    if cfg.hooks_allow_project:
        project = await anyio.to_thread.run_sync(project_hooks, cwd)
        if project is not None:
            sources.append(project)
    table = HookTable(tuple(sources))
    return table if table else None


def project_hooks(cwd: Path) -> HooksConfig | None:
    """The project's hooks file, or None when it is absent or broken (a warning names it)."""
    path = cwd / PROJECT_FILE
    try:
        raw = read_raw(path)
    except ConfigError as exc:
        log.warning("ignoring the project's hooks: %s", exc)
        return None
    if raw is None:
        return None
    # The file holds config.yaml's `hooks:` key, or the events alone.
    data = raw.get("hooks", raw)
    try:
        return HooksConfig.model_validate(data)
    except ValidationError as exc:
        log.warning("ignoring the project's hooks: %s: %s", path, describe_errors(exc))
        return None
