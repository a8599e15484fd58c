"""/export [path]: the whole transcript as markdown, tool calls collapsed, written to a file in
the working directory (or the path given); a path outside it needs the user's permission, as
the file tools' do, except in print mode, where the path is on the user's own command line and
nobody else is there to ask."""

from __future__ import annotations

from dataclasses import replace

import anyio

from acp_memory.atomic import write_atomic
from acp_memory.commands.base import CommandCall
from acp_memory.commands.markdown import render_transcript
from acp_memory.tools.base import ToolError, TurnCancelled
from acp_memory.tools.files import reachable, real_path

NOTHING = "nothing to export"


class Export:
    name = "export"
    description = "Write the conversation as markdown (tool calls collapsed) to a file"
    hint: str | None = "file path (optional; default <session id>.md in the working directory)"

    async def run(self, call: CommandCall) -> str:
        session = call.session
        if not session.messages:
            return NOTHING  # a file of 0 messages helps nobody
        target = call.argument or f"{session.id}.md"
        # The permission question names this call; the editor shows it as the asking row.
        ctx = call.runner.tool_context(session, call.editor)
        ctx = replace(ctx, call_id=f"export_{session.id}")
        try:
            if call.editor is not None and call.editor.user_is_the_command_line:
                path = await anyio.to_thread.run_sync(real_path, ctx, target)
            else:
                path, _ = await reachable(ctx, target, "Export the conversation to")
        except (ToolError, TurnCancelled) as exc:
            return f"Not exported: {exc}"
        text = render_transcript(session.messages, title=session.record.title or session.id)
        try:
            await anyio.to_thread.run_sync(write_atomic, path, text.encode("utf-8"))
        except OSError as exc:
            # Named by the target: the error's own filename may be write_atomic's temp file.
            return f"Not exported: cannot write {path}: {exc.strerror or exc}"
        return f"Exported {len(session.messages)} messages to {path}."
