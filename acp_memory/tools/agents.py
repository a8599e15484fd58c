"""spawn_agent: hand a task to a child agent and get its report back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from acp_memory.tools.base import ToolContext, ToolError, ToolKind, ToolResult


class SpawnAgent:
    name = "spawn_agent"
    description = (
        "Start a child agent on a self-contained task. It runs in a session of its own with "
        "at most your tools and sees none of this conversation, so give it everything it "
        "needs in `prompt`. Returns its final report; with background: true it returns a "
        "task id at once (read it with background_wait / background_output)."
    )
    kind: ToolKind = "think"
    read_only = False
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "minLength": 1, "description": "the whole task"},
            "name": {"type": "string", "description": "a short name shown on the task"},
            "background": {
                "type": "boolean",
                "description": "return at once with the task id (default false: wait)",
            },
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "description": "the child's tools, a subset of yours (default: all of yours)",
            },
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Agent {args.get('name') or 'subagent'}"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        if ctx.agents is None or ctx.tasks is None:
            raise ToolError("spawn_agent is not available in this session")
        task = await ctx.agents.start(
            args["prompt"], name=args.get("name", ""), tool_names=args.get("tools")
        )
        if args.get("background"):
            return ToolResult(
                f"Started {task.record.agent.name} as {task.id} in the background. "
                f"Use background_wait or background_output with task_id {task.id} for its "
                "report."
            )
        try:
            record = await ctx.tasks.wait(task)
        except anyio.get_cancelled_exc_class():
            # The call that waited for it is gone: so is the reason to keep it running.
            with anyio.CancelScope(shield=True):
                await ctx.tasks.stop(task.id, "stopped: the turn that waited for it ended")
            raise
        ctx.tasks.announcements.acknowledge(task.id)  # the model reads how it ended right here
        if record.status != "succeeded":
            reason = f": {record.error}" if record.error else ""
            raise ToolError(f"the subagent {task.id} ended {record.status}{reason}")
        return ToolResult(task.result or "(the subagent ended without a final message)")
