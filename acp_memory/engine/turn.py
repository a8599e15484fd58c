"""The ReAct turn loop: ask the model, run the tools it calls, repeat until it answers."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Protocol

import anyio

from acp_memory.engine.events import AgentText, AgentThought, Emit, PromptBlocked
from acp_memory.engine.history import ModelHistory
from acp_memory.engine.prompt import Templates, TurnContext, is_per_step, render_system
from acp_memory.engine.tool_calls import NOT_RUN_RESULT, cancelled_result, run_tool_calls
from acp_memory.hooks.events import SessionHooks
from acp_memory.llm.provider import closing
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import (
    ChatRequest,
    Finished,
    Message,
    ReasoningDelta,
    TextDelta,
    ToolCallReady,
)
from acp_memory.sessions.model import (
    PromptPart,
    StoredToolCall,
    TranscriptMessage,
    new_message_id,
    prompt_text,
    since_compaction,
)
from acp_memory.sessions.store import Session
from acp_memory.timestamps import Now, utc_now
from acp_memory.tools.base import (
    ToolContext,
)
from acp_memory.tools.registry import MAIN_AGENT_ONLY, PreparedCall, ToolRegistry, ToolSet

log = logging.getLogger(__name__)

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


class TurnContextSource(Protocol):
    """Where a turn's runtime state comes from: a per-turn part that may wait (the memory
    report, before the first model call) and a per-step part rebuilt before every request."""

    async def begin(self) -> None: ...

    def step(self) -> TurnContext: ...


class PlainContext:
    """No tasks, no memory: only the clock."""

    async def begin(self) -> None:
        return None

    def step(self) -> TurnContext:
        return TurnContext()


@dataclass
class TurnSetup:
    """What one run uses beyond the session: its tool set, what its tools may reach, where
    its runtime state comes from, its step cap and its system template."""

    tools: ToolSet | None = None  # default: the session mode's set
    tool_context: ToolContext | None = None  # services for the tools (editor, pool, ...)
    context: TurnContextSource = field(default_factory=PlainContext)
    max_turns: int | None = None
    template: str | None = None  # default "<mode>.md"
    hooks: SessionHooks | None = None  # UserPromptSubmit, PreToolUse, PostToolUse, Stop


class TurnEngine:
    """Runs turns for sessions; shareable by top-level and child sessions alike."""

    def __init__(
        self,
        templates: Templates,
        tools: ToolRegistry,
        max_turns: int,
        clock: Now = utc_now,
    ) -> None:
        self.templates = templates
        self.tools = tools
        self.max_turns = max_turns
        self.clock = clock  # the turn context's time; tests pass a ticking fake
        # Each live session's history as the model sees it, by id(session): dropped with it.
        self._histories: dict[int, ModelHistory] = {}

    def tools_for(self, session: Session) -> ToolSet:
        """The tool set of the session's mode."""
        return self.tools.for_mode(session.record.mode)

    async def build_request(
        self,
        session: Session,
        model: ModelHandle,
        context: TurnContext,
        tools: ToolSet | None = None,
        template: str | None = None,
    ) -> ChatRequest:
        """System, then the whole history, then the turn context as the last user message
        (with a per-step template: the memory report alone, or nothing)."""
        tools = tools or self.tools_for(session)
        specs = tools.specs()
        record = session.record
        # Read again whenever the file changed, so hand edits apply; off the event loop like
        # every file read (an unchanged file costs a stat).
        name = template or f"{record.mode}.md"
        text = self.templates.cached(name)
        if text is None:
            text = await anyio.to_thread.run_sync(
                self.templates.load, name, abandon_on_cancel=True
            )
        per_step = is_per_step(text)
        body = render_system(
            text,
            cwd=record.cwd,
            tools=specs,
            memory=record.agent_memory,
            step=context if per_step else None,
            additional_directories=record.additional_directories,
        )
        # The inline notes first, so they sit at the head of the cached prefix; frozen at
        # session/new.
        system = f"{record.inline_memory}\n\n{body}" if record.inline_memory else body
        # Images reach a model that takes them; one selected since reads their [image] marks.
        images = model.config.vision
        history = self._history(session).messages(since_compaction(session.messages), images)
        messages = [Message("system", system), *history]
        prefix = len(messages)
        tail = context.memory_message() if per_step else context.message()
        if tail is not None:
            messages.append(tail)
        return model.request(messages, tools=specs, cache_prefix_len=prefix)

    def _history(self, session: Session) -> ModelHistory:
        key = id(session)
        history = self._histories.get(key)
        if history is None:
            history = self._histories[key] = ModelHistory()
            weakref.finalize(session, self._histories.pop, key, None)
        return history

    async def run(
        self,
        session: Session,
        prompt: str | Sequence[PromptPart],
        model: ModelHandle,
        emit: Emit,
        setup: TurnSetup | None = None,
    ) -> StopReason:
        """One user turn of a text prompt, or of one holding images (its parts); the
        transcript is persisted after every message, even on cancel."""
        parts = None if isinstance(prompt, str) else list(prompt)
        user_text = prompt_text(prompt)
        setup = setup or TurnSetup()
        tools = setup.tools or self.tools_for(session)
        if session.record.subagent_run:
            # Children (spawn_agent and memory runs alike) never get the main agent's own tools.
            tools = tools.without(MAIN_AGENT_ONLY)
        base = replace(setup.tool_context or _tool_context(session), message=user_text)
        hooks = setup.hooks
        if hooks is not None and (blocked := await hooks.prompt_submitted(user_text)):
            # Refused before it is recorded: no transcript entry, no model call, no memory run.
            await emit(PromptBlocked(blocked))
            return "refusal"
        await session.append(
            TranscriptMessage(
                role="user", content=user_text, parts=parts, message_id=new_message_id()
            )
        )
        await setup.context.begin()
        stop: StopReason = "max_turn_requests"
        for _ in range(setup.max_turns or self.max_turns):
            context = setup.context.step()  # rebuilt at every step: fresh time, tasks, memory
            if context.now is None:
                context.now = self.clock()
            if hooks is not None:
                context.hook_output = hooks.context
            reply = await self._step(session, model, emit, context, tools, setup.template, base)
            if reply.calls:
                if not await run_tool_calls(session, reply.calls, emit, tools, base, hooks):
                    return "cancelled"
                continue
            if reply.finish == "length":
                stop = "max_tokens"
            else:
                stop = "refusal" if reply.finish == "refusal" else "end_turn"
            break
        if hooks is not None:
            await hooks.stopped(stop)
        return stop

    async def _step(
        self,
        session: Session,
        model: ModelHandle,
        emit: Emit,
        context: TurnContext,
        tools: ToolSet,
        template: str | None,
        base: ToolContext,
    ) -> _Reply:
        """One model call: what it said, and the tool calls it asked for, resolved."""
        request = await self.build_request(session, model, context, tools, template)
        reply = _Reply()
        complete = False
        try:
            events = model.stream(request)
            # Closing at once on cancel drops the HTTP stream, so the server sees us go.
            async with closing(events):
                async for event in events:
                    if isinstance(event, TextDelta):
                        reply.text.append(event.text)
                        await emit(AgentText(event.text, reply.message_id))
                    elif isinstance(event, ReasoningDelta):
                        reply.reasoning.append(event.text)
                        await emit(AgentThought(event.text, reply.message_id))
                    elif isinstance(event, ToolCallReady):
                        reply.calls.append(tools.prepare(event.call))
                    elif isinstance(event, Finished):
                        reply.finish = event.reason
            complete = True
        finally:
            # Recorded even when cancelled mid-stream, so the transcript shows what was seen.
            if reply.text or reply.reasoning or reply.calls:
                await session.append(reply.to_transcript(base))
            if not complete:
                # Calls that arrived before the stream was cut never run; providers refuse a
                # history where a tool call has no result, so each gets a cancelled one.
                for prepared in reply.calls:
                    await session.append(cancelled_result(prepared.call, NOT_RUN_RESULT))
        return reply


def _tool_context(session: Session) -> ToolContext:
    record = session.record
    roots = tuple(Path(folder) for folder in record.additional_directories)
    return ToolContext(session.id, Path(record.cwd), record.mode, roots=roots, bundle=session.dir)


class _Reply:
    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[PreparedCall] = []
        self.finish: str = "stop"
        self.message_id = new_message_id()

    def to_transcript(self, ctx: ToolContext) -> TranscriptMessage:
        calls = [
            StoredToolCall(
                id=p.call.id,
                name=p.call.name,
                arguments=p.call.arguments,
                title=p.title,
                kind=p.kind,
                locations=p.locations(ctx) or None,
            )
            for p in self.calls
        ]
        return TranscriptMessage(
            role="assistant",
            content="".join(self.text),
            reasoning="".join(self.reasoning) or None,
            tool_calls=calls or None,
            message_id=self.message_id,
        )
