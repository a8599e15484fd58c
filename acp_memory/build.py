"""Assembles what every surface runs on: the turn engine with the main agent's tools, and the
session runner over it (the ACP server, print mode and the HTTP server each build one)."""

from __future__ import annotations

from functools import partial

from acp_memory.commands.registry import BuiltinCommands
from acp_memory.config import Config, Paths
from acp_memory.engine.prompt import Templates
from acp_memory.engine.turn import TurnEngine
from acp_memory.hooks.surface import Hooks
from acp_memory.llm.registry import ProviderHub
from acp_memory.memory.direct import DirectMemoryTool
from acp_memory.runtime.runner import SessionRunner
from acp_memory.runtime.tidy_run import TidyPasses
from acp_memory.tools.agents import SpawnAgent
from acp_memory.tools.background import BACKGROUND_TOOLS
from acp_memory.tools.command import RunCommand
from acp_memory.tools.edit import EditFile, WriteFile
from acp_memory.tools.files import ListDirectory, ReadFile
from acp_memory.tools.plan import UpdatePlan, WritePlan
from acp_memory.tools.registry import ToolRegistry
from acp_memory.tools.search import Glob, Grep


def build_engine(cfg: Config, paths: Paths | None = None) -> TurnEngine:
    """The turn engine with the configured templates and the main agent's tools; with
    memory.inline, Kodik's `memory` tool too, whose global root needs `paths`."""
    tools = ToolRegistry(
        [
            ReadFile(),
            ListDirectory(),
            Glob(),
            Grep(),
            WriteFile(),
            EditFile(),
            WritePlan(),
            UpdatePlan(),
            RunCommand(),
            *(tool() for tool in BACKGROUND_TOOLS),
            SpawnAgent(),
        ]
    )
    if cfg.memory.inline:
        if paths is None:
            raise ValueError("memory.inline needs the home folder's paths for its memory tool")
        tools.add(DirectMemoryTool(cfg, paths))
    return TurnEngine(Templates(cfg.prompts.dir), tools, cfg.agent.max_turns)


def build_runner(
    cfg: Config, paths: Paths, hub: ProviderHub, *, hooks: Hooks | None = None
) -> SessionRunner:
    """The session runner of one surface: engine, models, tool services; hooks, the
    config's unless the surface runs its own (the proxy runs none)."""
    engine = build_engine(cfg, paths)
    runner = SessionRunner(
        cfg,
        paths,
        engine,
        hub.model,
        partial(hub.model, wait_for_limit_reset=False),
        hooks=Hooks(cfg) if hooks is None else hooks,
        commands=BuiltinCommands(),
    )
    runner.memory.on_open.append(TidyPasses(runner.memory).opened)  # memory.tidy.every_hours
    return runner
