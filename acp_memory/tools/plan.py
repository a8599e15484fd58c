"""write_plan: the one thing plan mode may write, a plan file inside the session bundle."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from acp_memory.atomic import write_atomic
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
