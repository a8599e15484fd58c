"""The tools a session may call, their per-mode availability, and safe execution."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema

from acp_memory.llm.types import ToolSpec
from acp_memory.tools.base import Tool, ToolContext, ToolError, ToolResult

log = logging.getLogger(__name__)


class ToolRegistry:
    """Tools by name; ask and plan modes see only read-only tools."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        jsonschema.Draft202012Validator.check_schema(dict(tool.parameters))
        self._tools[tool.name] = tool

    def available(self, mode: str) -> list[Tool]:
        """The tools offered to the model in a mode, in registration order."""
        return [t for t in self._tools.values() if mode == "agent" or t.read_only]

    def specs(self, mode: str) -> list[ToolSpec]:
        return [ToolSpec(t.name, t.description, dict(t.parameters)) for t in self.available(mode)]

    def get(self, name: str, mode: str) -> Tool | None:
        tool = self._tools.get(name)
        return tool if tool is not None and tool in self.available(mode) else None

    async def execute(self, name: str, raw_arguments: str, ctx: ToolContext) -> ToolResult:
        """Run a tool call; every failure becomes a tool error the model can read."""
        tool = self.get(name, ctx.mode)
        if tool is None:
            offered = ", ".join(t.name for t in self.available(ctx.mode)) or "none"
            return ToolResult(
                f"Error: there is no tool named {name!r} in {ctx.mode} mode. Tools: {offered}.",
                is_error=True,
            )
        args = parse_arguments(raw_arguments)
        if isinstance(args, ToolResult):
            return args
        problem = schema_problem(tool.parameters, args)
        if problem:
            return ToolResult(f"Error: invalid arguments for {name}: {problem}", is_error=True)
        try:
            return await tool.run(args, ctx)
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", is_error=True)
        except Exception as exc:
            # A tool's own bug must not end the turn: the model reads the failure and goes on.
            log.exception("tool %s failed", name)
            return ToolResult(f"Error: {name} failed: {type(exc).__name__}: {exc}", is_error=True)


def tool_locations(tool: Tool, args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
    """The absolute paths a call will touch, for the editor's tool-call row (optional hook)."""
    hook = getattr(tool, "locations", None)
    if hook is None:
        return []
    try:
        return list(hook(args, ctx))
    except Exception:  # locations are cosmetic; a bad path is the tool's error to report
        return []


def parse_arguments(raw: str) -> dict[str, Any] | ToolResult:
    """The arguments object, or a tool error saying why the text is not one."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        return ToolResult(f"Error: the arguments are not valid JSON ({exc}).", is_error=True)
    if not isinstance(value, dict):
        return ToolResult("Error: the arguments must be a JSON object.", is_error=True)
    return value


def schema_problem(schema: Mapping[str, Any], args: Mapping[str, Any]) -> str | None:
    """A one-line description of the first schema violation, or None."""
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(dict(schema)).iter_errors(dict(args))
    )
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message
