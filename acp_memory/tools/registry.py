"""The tools a session may call: the registry, each mode's set, and safe execution."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from acp_memory.llm.types import ToolCall, ToolSpec
from acp_memory.tools.base import Tool, ToolContext, ToolError, ToolKind, ToolResult, TurnCancelled

log = logging.getLogger(__name__)


# What each mode may use. A mode never sees, and is never offered, a tool outside its set.
MODE_TOOLS: dict[str, frozenset[str] | None] = {
    "agent": None,  # every registered tool but the plan mode's own writer
    "plan": frozenset(
        {
            "read_file", "list_directory", "glob", "grep",
            "background_list", "background_output", "background_wait", "write_plan",
            "update_plan",
        }
    ),
    "ask": frozenset({"read_file", "list_directory", "glob", "grep"}),
}
PLAN_ONLY = frozenset({"write_plan"})
# Tools of a top-level session only: a child session is never offered them, whatever its
# parent has (Kodik's `memory` tool, registered with memory.inline: agent mode only; and
# update_plan, as a child's plan would reach no editor).
MAIN_AGENT_ONLY = frozenset({"memory", "update_plan"})


class ToolSet:
    """The tools one engine run may offer and call, in order; the engine is handed one."""

    def __init__(self, tools: Iterable[Tool], label: str = "this session") -> None:
        self._tools = {t.name: t for t in tools}
        self.label = label  # named in the error for a call outside the set

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec(t.name, t.description, dict(t.parameters)) for t in self]

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def subset(self, names: Iterable[str], label: str | None = None) -> ToolSet:
        """The tools of this set among `names` (a child never gets more than its parent)."""
        wanted = set(names)
        return ToolSet([t for t in self if t.name in wanted], label or self.label)

    def without(self, names: Iterable[str]) -> ToolSet:
        unwanted = set(names)
        return ToolSet([t for t in self if t.name not in unwanted], self.label)

    def prepare(self, call: ToolCall) -> PreparedCall:
        """Resolve a call once: its tool, its arguments or why it cannot run, its title."""
        tool = self.get(call.name)
        args = parse_arguments(call.arguments)
        problem: ToolResult | None = None
        if tool is None:
            offered = ", ".join(self.names()) or "none"
            problem = ToolResult(
                f"Error: there is no tool named {call.name!r} in {self.label}. "
                f"Tools: {offered}.",
                is_error=True,
            )
        elif isinstance(args, ToolResult):
            problem = args
        elif why := schema_problem(tool.parameters, args):
            problem = ToolResult(f"Error: invalid arguments for {call.name}: {why}", is_error=True)
        parsed = args if isinstance(args, dict) else None
        return PreparedCall(call, tool, parsed, problem, _title(tool, parsed, call.name))

    async def run(self, prepared: PreparedCall, ctx: ToolContext) -> ToolResult:
        """Run a prepared call; every failure becomes a tool error the model can read."""
        if prepared.problem is not None or prepared.tool is None or prepared.args is None:
            return prepared.problem or ToolResult("Error: the call cannot run.", is_error=True)
        name = prepared.call.name
        try:
            return await prepared.tool.run(prepared.args, ctx)
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", is_error=True)
        except TurnCancelled:
            raise
        except Exception as exc:
            # A tool's own bug must not end the turn: the model reads the failure and goes on.
            log.exception("tool %s failed", name)
            return ToolResult(f"Error: {name} failed: {type(exc).__name__}: {exc}", is_error=True)

    async def execute(self, name: str, raw_arguments: str, ctx: ToolContext) -> ToolResult:
        """Prepare and run one call by name."""
        return await self.run(self.prepare(ToolCall("", name, raw_arguments)), ctx)


# Schemas already checked: every surface builds its registry again, and a check costs ~20 ms.
_CHECKED_SCHEMAS: set[str] = set()


def _check_schema(parameters: Mapping[str, Any]) -> None:
    """Raise jsonschema.SchemaError for a malformed tool schema (each one checked once)."""
    key = json.dumps(parameters, sort_keys=True, default=str)
    if key not in _CHECKED_SCHEMAS:
        jsonschema.Draft202012Validator.check_schema(dict(parameters))
        _CHECKED_SCHEMAS.add(key)


class ToolRegistry:
    """Every tool the agent has, and the set each mode gets."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        _check_schema(tool.parameters)
        self._tools[tool.name] = tool

    def for_mode(self, mode: str) -> ToolSet:
        """The tools a session in `mode` is offered, in registration order."""
        allowed = MODE_TOOLS.get(mode, frozenset())
        tools = [
            t
            for t in self._tools.values()
            if (t.name not in PLAN_ONLY if allowed is None else t.name in allowed)
        ]
        return ToolSet(tools, f"{mode} mode")


@dataclass(frozen=True)
class PreparedCall:
    """A model's tool call, resolved once for the engine, the transcript and the editor."""

    call: ToolCall
    tool: Tool | None
    args: dict[str, Any] | None  # None when the arguments are not a JSON object
    problem: ToolResult | None  # why the call cannot run, as the model will read it
    title: str

    @property
    def kind(self) -> ToolKind:
        return self.tool.kind if self.tool is not None else "other"

    @property
    def raw_input(self) -> Any:
        return self.args if self.args is not None else self.call.arguments

    def locations(self, ctx: ToolContext) -> list[str]:
        """The absolute paths the call will touch, for the editor's row (optional tool hook)."""
        hook = getattr(self.tool, "locations", None)
        if hook is None or self.args is None:
            return []
        try:
            return list(hook(self.args, ctx))
        except Exception:  # locations are cosmetic; a bad path is the tool's error to report
            return []


def _title(tool: Tool | None, args: dict[str, Any] | None, name: str) -> str:
    if tool is None or args is None:
        return name
    try:
        return tool.title(args) or name
    except Exception:  # a title is cosmetic; never let it break the turn
        return name


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
