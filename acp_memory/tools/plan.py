"""write_plan: the one thing plan mode may write, a plan file inside the session bundle; and
update_plan: the checklist the editor shows beside the conversation (ACP's plan update)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

import anyio

from acp_memory.atomic import write_atomic
from acp_memory.sessions.model import PlanEntry, PlanPriority, PlanStatus
from acp_memory.tools.base import Diff, ToolContext, ToolError, ToolKind, ToolResult

PLANS_DIR = "plans"
PLAN_SUFFIX = ".plan.md"
_MAX_SLUG = 60


def plan_slug(title: str) -> str:
    """A file name from a title: lower-case letters (any script), digits, _ and -."""
    slug = re.sub(r"[^\w]+", "-", title.lower()).strip("-_")[:_MAX_SLUG].strip("-_")
    return slug or "plan"


class WritePlan:
    name = "write_plan"
    description = (
        "Save a plan as markdown in this session's plans folder (plans/<slug>.plan.md, the "
        "slug made from the title). Writing the same title again replaces that plan. Nothing "
        "outside the session is touched."
    )
    kind: ToolKind = "edit"
    read_only = True  # it writes only inside the session bundle
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "the plan's title; names its file"},
            "content": {"type": "string", "description": "the plan, in markdown"},
        },
        "required": ["title", "content"],
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Plan: {args.get('title', '')}"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        if ctx.bundle is None:
            raise ToolError("this session has no bundle to keep plans in")
        if not args["content"].strip():
            raise ToolError("content is empty; write the plan itself")
        path = ctx.bundle / PLANS_DIR / f"{plan_slug(args['title'])}{PLAN_SUFFIX}"
        old = await anyio.to_thread.run_sync(_write, path, args["content"])
        return ToolResult(
            f"Saved the plan to {path}.",
            locations=[str(path)],
            content=[Diff(str(path), old, args["content"])],
        )


def _write(path: Path, content: str) -> str | None:
    try:
        old = path.read_text(encoding="utf-8") if path.is_file() else None
    except (OSError, UnicodeDecodeError):
        old = None  # the diff only shows what changed; a damaged old plan is replaced
    try:
        write_atomic(path, content.encode("utf-8"))
    except OSError as exc:
        raise ToolError(f"cannot save the plan to {path}: {exc.strerror or exc}") from None
    return old


_STATUSES: tuple[str, ...] = get_args(PlanStatus)


class UpdatePlan:
    name = "update_plan"
    description = (
        "Show the user your plan for the task as a checklist in the editor. Send the whole "
        "list every time (it replaces the one shown before), in order, each entry with its "
        "status: pending, in_progress or completed. Keep the entry you work on in_progress "
        "and mark each one completed when it is done. priority is high, medium or low "
        "(medium when left out). For a plan saved as a file, plan mode has write_plan."
    )
    kind: ToolKind = "think"
    read_only = True  # it changes only what the editor shows
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "entries": {
                "type": "array",
                "description": "the whole plan, in order",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "what this step does"},
                        "status": {"type": "string", "enum": list(_STATUSES)},
                        "priority": {"type": "string", "enum": list(get_args(PlanPriority))},
                    },
                    "required": ["content", "status"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["entries"],
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        return "Update the plan"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        # The schema (checked before run) holds the statuses and priorities to ACP's values.
        entries = [
            PlanEntry.model_validate({**e, "content": e["content"].strip()})
            for e in args["entries"]
        ]
        for number, entry in enumerate(entries, start=1):
            if not entry.content:
                raise ToolError(f"entry {number} has no content; say what the step does")
        counts = ", ".join(
            f"{sum(e.status == status for e in entries)} {status.replace('_', ' ')}"
            for status in _STATUSES
        )
        return ToolResult(f"The plan is shown: {len(entries)} entries ({counts}).", plan=entries)
