"""Child sessions that a session starts (spawn_agent): a bundle of their own under the parent's
`subagents/` folder, a turn run as an agent task of the parent's pool, a report back.

A child is a separate conversation: its updates go to its task log, never to the parent's
stream; its tool set is at most its parent's; its depth is bounded by subagents.max_depth.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import anyio

from acp_memory.editor import Editor, EditorFor
from acp_memory.engine.events import (
    AgentText,
    AgentThought,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    TurnEvent,
)
from acp_memory.engine.turn import TurnEngine, TurnSetup
from acp_memory.hooks.events import Subagent
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import LLMError, status_phrase
from acp_memory.oserror import os_error_text
from acp_memory.sessions.store import Session
from acp_memory.tasks.admission import PoolRefused
from acp_memory.tasks.log import TaskLog
from acp_memory.tasks.pool import TaskPool
from acp_memory.tasks.task import Task, TaskFailed
from acp_memory.text.lines import first_line
from acp_memory.text.task_text import cut_task_text
from acp_memory.tools.base import ToolError
from acp_memory.tools.registry import ToolSet

if TYPE_CHECKING:
    from acp_memory.runtime.runner import SessionRunner

log = logging.getLogger(__name__)

REPORT_HEADER = "=== subagent report ==="
# How long a stopped child's SubagentStop hooks may hold up the stop.
STOPPED_HOOK_SECONDS = 5.0


class Subagents:
    """The spawn_agent service of one session: starts its children in its pool."""

    def __init__(
        self,
        runner: SessionRunner,
        parent: Session,
        pool: TaskPool,
        tools: ToolSet,
        editor: Editor | None = None,
    ) -> None:
        self.runner = runner
        self.parent = parent
        self.pool = pool
        self.tools = tools  # the parent's own set: a child gets at most this
        self.editor = editor

    @property
    def depth(self) -> int:
        return self.parent.record.subagent_depth or 0

    def child_tools(self, names: Sequence[str] | None) -> ToolSet:
        """The child's tool set: the names asked for among the parent's, never more; a child
        at the depth limit cannot start children of its own."""
        tools = self.tools if names is None else self.tools.subset(names)
        if self.depth + 1 >= self.runner.cfg.subagents.max_depth:
            tools = tools.without(["spawn_agent"])
        return tools

    async def start(
        self, prompt: str, *, name: str = "", tool_names: Sequence[str] | None = None
    ) -> Task:
        """Create the child's bundle and start its turn as an agent task of the pool.

        ToolError when the depth or the concurrency bound refuses it, or a tool asked for is
        not the parent's."""
        limits = self.runner.cfg.subagents
        if self.depth + 1 > limits.max_depth:
            raise ToolError(
                f"subagents may nest {limits.max_depth} deep (subagents.max_depth); "
                "this session is already at that depth"
            )
        if tool_names is not None:
            unknown = sorted(set(tool_names) - set(self.tools.names()))
            if unknown:
                raise ToolError(
                    f"a child gets at most its parent's tools; not available here: "
                    f"{', '.join(unknown)}"
                )
        agent_name = name.strip() or "subagent"
        tools = self.child_tools(tool_names)
        task_text = cut_task_text(prompt)
        parent = self.parent
        create = partial(
            self.runner.store.create,
            cwd=parent.record.cwd,
            additional_directories=parent.record.additional_directories,
            model_id=parent.record.selected_model_id,
            parent=parent,
            subagent_name=agent_name,
            subagent_depth=self.depth + 1,
        )
        try:
            child = await anyio.to_thread.run_sync(create)
        except OSError as exc:
            raise ToolError(f"cannot create the child session: {os_error_text(exc)}") from None

        async def body(task: Task) -> str:
            child.record.subagent_task_id = task.id  # the child's bundle names its task
            subagent = Subagent(agent_name, child.id, "agent")
            try:
                await child.save_record()
                hooks = await self.runner.hooks.for_session(parent)
                if hooks is None:
                    return await self._run_child(child, task_text, tools, task.log, subagent)
                await hooks.subagent_started(subagent, task_text)
                stopped = False
                try:
                    return await self._run_child(child, task_text, tools, task.log, subagent)
                except anyio.get_cancelled_exc_class():
                    stopped = True
                    raise
                finally:
                    # Finished, failed, stopped or timed out, the child has ended. After a
                    # stop its hook runs shielded, but briefly: a stop must stay prompt.
                    bound = STOPPED_HOOK_SECONDS if stopped else None
                    with anyio.CancelScope(shield=stopped), anyio.move_on_after(bound):
                        await hooks.subagent_stopped(subagent)
            finally:
                self.runner.close_pool(child.id, "stopped: its subagent ended")
                child.close()

        try:
            task = await self.pool.start_agent(
                label=f"{agent_name}: {first_line(prompt)}",
                agent_name=agent_name,
                child_session_id=child.id,
                body=body,
                kind_limit=limits.max_concurrent,
            )
        except PoolRefused as exc:
            child.close()
            raise ToolError(f"the subagent was not started: {exc}") from None
        return task

    async def _run_child(
        self, child: Session, task_text: str, tools: ToolSet, task_log: TaskLog, subagent: Subagent
    ) -> str:
        runner = self.runner
        model = runner.model_for(child.record.selected_model_id)
        # The editor knows only the parent: a child's file and terminal requests, and its
        # permission questions, go to it in the parent's name.
        editor = EditorFor(self.editor, self.parent.id) if self.editor is not None else None
        setup = TurnSetup(
            tools=tools,
            tool_context=runner.tool_context(child, editor, tools=tools),
            context=runner.turn_context(child),
            # Inside the child every ordinary event fires too, its payloads carrying its block.
            hooks=await runner.hooks.for_child(child, subagent),
        )
        return await run_child_turn(
            runner.engine, child, task_text, model, setup, task_log, report_of=last_reply
        )


async def run_child_turn(
    engine: TurnEngine,
    child: Session,
    task_text: str,
    model: ModelHandle,
    setup: TurnSetup,
    task_log: TaskLog,
    report_of: Callable[[Session], str],
) -> str:
    """A child's turn (spawn_agent and memory runs alike): its events in its task log, then
    its report block; returns the report (`report_of` the child once its turn ended). A model
    failure fails the task with its reason."""
    await task_log.write(f"task: {log_line(task_log, task_text)}\n")
    try:
        stop = await engine.run(child, task_text, model, log_events(task_log), setup)
    except LLMError as err:
        await task_log.write(f"\n[the child's model failed: {err}]\n")
        raise TaskFailed(llm_reason(err)) from None
    report = report_of(child)
    await task_log.write(f"\n{REPORT_HEADER}\n{report or '(no final message)'}\n")
    if stop != "end_turn":
        await task_log.write(f"[the child's turn ended: {stop}]\n")
    return report


def llm_reason(err: LLMError) -> str:
    """The provider's failure as the task record and the finished update say it:
    status, reason phrase and the provider's words (`402 Payment Required: ...`)."""
    if not err.status:
        return err.message
    # An HTTP error's message opens with its phrase; an error event inside a stream's not.
    phrase, message = status_phrase(err.status), err.message
    if phrase and not message.startswith(phrase):
        message = f"{phrase}: {message}" if message else phrase
    return f"{err.status} {message}"


def log_events(task_log: TaskLog) -> Callable[[TurnEvent], Awaitable[None]]:
    """A child's turn events as its task log's lines (a child never streams to the editor)."""

    async def emit(event: TurnEvent) -> None:
        match event:
            case AgentText(text):
                await task_log.write(text)
            case AgentThought():
                pass
            case ToolCallStarted():
                args = task_log.clean(json.dumps(event.raw_input, ensure_ascii=False))[:300]
                await task_log.write(f"\n[tool] {event.title} {args}\n")
            case ToolCallProgress():
                pass
            case ToolCallFinished():
                await task_log.write(f"[tool] {event.status}: {log_line(task_log, event.output)}\n")

    return emit


def log_line(task_log: TaskLog, text: str) -> str:
    """The first line of text as the log keeps it: cleaned by its filter before the cut, so
    that a secret the cut would split is still whole when it is rewritten."""
    return first_line(task_log.clean(first_line(text, 1000)))


def last_reply(session: Session) -> str:
    for message in reversed(session.messages):
        if message.role == "assistant" and message.content.strip():
            return message.content.strip()
        if message.role == "user":
            break
    return ""
