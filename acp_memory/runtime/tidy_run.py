"""A tidy run over one root: the candidate groups (`memory/tidy/`'s `candidate_groups`) handed
to a child with the memory model chain, the read tools and `propose_change`
(`memory/proposals.py`), whose proposals are held, or made at once with `apply`; nothing is
written otherwise. `notes tidy` and the background pass (`TidyPasses`) run one through
`run_tidy`; `/memory tidy` (`tidy_in_session`) runs the same child as a memory run of the
session (a system task of its pool, its cost metered), telling the editor its memory_run
updates with `_meta.acpMemory.kind: "tidy"`.

The background pass (`TidyPasses`) runs every `memory.tidy.every_hours` per root, one at a
time per root, and always holds its proposals.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from acp_memory.config import Paths
from acp_memory.config.models import Config
from acp_memory.engine.events import TurnEvent
from acp_memory.engine.prompt import Templates
from acp_memory.engine.turn import TurnEngine, TurnSetup
from acp_memory.llm.chain import ChainProvider
from acp_memory.llm.registry import ModelHandle, ProviderHub
from acp_memory.llm.types import LLMError
from acp_memory.memory.history.records import ChangeSource, Held
from acp_memory.memory.history.service import TIDY_SURFACE
from acp_memory.memory.proposals import Proposals, propose_tool
from acp_memory.memory.redact import redact_json
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.memory.tidy import Group, candidate_groups
from acp_memory.memory.tools import memory_tools
from acp_memory.runtime.memory_agent import (
    READ_TOOLS,
    MemoryLaunch,
    MemoryTemplates,
    memory_max_turns,
    memory_model_chain,
)
from acp_memory.runtime.memory_run import (
    NotifyMemory,
    finished_update,
    kind_meta,
    report_of,
    run_reason,
    send_update,
)
from acp_memory.runtime.memory_service import Launched, MemoryService, final_message
from acp_memory.runtime.run_retention import is_memory_run, retain_bundles
from acp_memory.sessions.store import Session, SessionStore
from acp_memory.tasks.admission import PoolRefused
from acp_memory.tasks.records import TaskRecord
from acp_memory.tasks.task import Task
from acp_memory.text.task_text import cut_task_text
from acp_memory.text.tidy_task import HEADING, TaskGroup, tidy_task
from acp_memory.tools.registry import ToolRegistry, ToolSet

log = logging.getLogger(__name__)

TIDY_TEMPLATE = "tidy_agent.md"
TIDY_SOURCE = ChangeSource(TIDY_SURFACE)  # how the history names a tidy run's changes
TIDY_SESSIONS = "tidy"  # the sessions folder's subfolder of the sessionless tidy runs' bundles
NOTHING_TO_TIDY = "nothing to tidy: no duplicates, contradictions or stale citations found"


# (store, scope, max_groups) -> the candidate groups of the scope's root.
Candidates = Callable[[MemoryStore, str, int], Sequence[Group]]


@dataclass
class TidyOutcome:
    """What a tidy run did: its proposals held (and made, with apply), and its report."""

    scope: str
    groups: int
    report: str
    held: list[Held] = field(default_factory=list)
    made: list[Held] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"scope": self.scope, "groups": self.groups,
                "held": [held_json(h) for h in self.held if h not in self.made],
                "made": [held_json(h) for h in self.made], "refused": self.refused,
                "report": self.report}


def held_json(held: Held) -> dict[str, Any]:
    """A proposal as `--json` lists it: its id, paths and reason."""
    return {"id": held.id, "paths": [f"{held.scope}:{p.path}" for p in held.all_parts],
            "actions": [p.action for p in held.all_parts], "reason": held.reason}


async def run_tidy(
    cfg: Config,
    store: MemoryStore,
    scope: str,
    *,
    child: Session,
    models: Sequence[ModelHandle],
    templates: Templates,
    candidates: Candidates,
    apply: bool = False,
) -> TidyOutcome:
    """One tidy run over scope's root in child's bundle (see the module's docstring)."""
    groups = await anyio.to_thread.run_sync(candidates, store, scope, cfg.memory.tidy.max_groups)
    if not groups:
        return TidyOutcome(scope, 0, NOTHING_TO_TIDY)
    proposals = Proposals(store, apply=apply)
    tools = tidy_tools(cfg, store, proposals)
    task = tidy_text(scope, groups)
    chain = ChainProvider(list(models), cfg.memory.copilot_max_tokens)
    model = ModelHandle(models[0].model_id, chain, models[0].config)
    engine = TurnEngine(templates, ToolRegistry(), memory_max_turns(cfg))
    setup = TurnSetup(tools=tools, max_turns=memory_max_turns(cfg), template=TIDY_TEMPLATE)
    await engine.run(child, task, model, _ignored, setup)
    return TidyOutcome(scope, len(groups), final_message(child), list(proposals.held),
                       list(proposals.made), list(proposals.refused))


def tidy_tools(cfg: Config, store: MemoryStore, proposals: Proposals) -> ToolSet:
    """A tidy child's tools: the read tools and `propose_change` into proposals."""
    reads = [t for t in memory_tools(store, cfg.memory) if t.name in READ_TOOLS]
    return ToolSet([*reads, propose_tool(proposals)], "the tidy subagent")


def tidy_text(scope: str, groups: Sequence[Group]) -> str:
    """A tidy child's task: scope's candidate groups, one line each, within the task bound."""
    return cut_task_text(tidy_task(f"{scope}:", [TaskGroup(g.kind, tuple(g.paths), g.why)
                                                 for g in groups]))


def is_tidy_run(record: TaskRecord) -> bool:
    """Whether a memory run's record is a tidy run's (its label names its task's head):
    `/memory undo` takes a turn's run, never one of these."""
    head = HEADING.split("{root}")[0]
    return is_memory_run(record) and record.label.startswith(f"memory: {head}")


async def tidy_root(
    cfg: Config, paths: Paths, store: MemoryStore, scope: str, *, apply: bool,
    model_for: Callable[[str], ModelHandle],
) -> TidyOutcome:
    """A tidy run of scope's root on the memory model chain (`notes tidy`, a background
    pass), in a bundle of its own under `<sessions>/tidy/`, written as a memory run's are
    (redacted, unsynced); that folder keeps the newest `memory.keep_runs` of them."""
    model_ids = memory_model_chain(cfg, cfg.default_model_id())
    sessions = paths.sessions_dir / TIDY_SESSIONS
    child = SessionStore(sessions).create(
        cwd=str(store.roots.cwd or paths.cwd), model_id=model_ids[0],
        durable=False, scrub=redact_json)
    try:
        return await run_tidy(
            cfg, store, scope, child=child, apply=apply, candidates=candidate_groups,
            models=[model_for(m) for m in model_ids],
            templates=Templates(cfg.prompts.dir))
    finally:
        child.close()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(retain_bundles, sessions, cfg.memory.keep_runs)


async def tidy_in_session(
    memory: MemoryService, session: Session, scope: str, notify: NotifyMemory | None,
) -> list[str]:
    """`/memory tidy [SCOPE]`: a tidy run of scope's root as a memory run of session (a
    system task of its pool within the memory runs' bounds, its child under the session's
    `subagents/`, on the session's memory model chain), its proposals held as the session's
    (`/memory approve|reject`); notify hears it started, finished (never delivered: the
    reply is the command's) or skipped. The reply's lines."""
    cfg = memory.cfg
    with memory.store_for(session.record.cwd, TIDY_SOURCE) as store:
        groups = await anyio.to_thread.run_sync(candidate_groups, store, scope,
                                                cfg.memory.tidy.max_groups)
    if not groups:
        return [NOTHING_TO_TIDY]
    token = object()  # this run's own hold on the bounds
    if (reason := memory.bounds.admit(session.id, token)) is not None:
        log.warning("tidy run skipped for %s: %s", session.id, reason)
        await send_update(memory.clock, notify,
                          {"status": "skipped", "reason": reason, "_meta": kind_meta("tidy")})
        return [f"No tidy run: {reason}."]
    proposals: list[Proposals] = []

    def prepare(run_store: MemoryStore) -> MemoryLaunch:
        proposals.append(Proposals(run_store))
        return MemoryLaunch(
            task=tidy_text(scope, groups), tools=tidy_tools(cfg, run_store, proposals[0]),
            templates=MemoryTemplates.for_launch(memory.engine.templates, cfg.memory,
                                                 read_only=False),
            models=memory_model_chain(cfg, session.record.selected_model_id),
            max_turns=memory_max_turns(cfg), read_only=False, template=TIDY_TEMPLATE)

    announced = anyio.Event()  # the started update went out (or never will)
    settled = anyio.Event()  # the finished update went out (or never will)
    runs: list[Launched] = []

    def on_finish(task: Task) -> None:
        async def settle() -> None:
            # In the owner group: a command cancelled meanwhile still tells the editor.
            try:
                await announced.wait()  # started before finished, however fast it ended
                if runs:
                    await send_update(memory.clock, notify, finished_update(
                        task.id, runs[0].child_id, task.record, delivered=False, kind="tidy"))
                    await memory.retain(session, runs[0].pool)
            finally:
                settled.set()

        if not memory.spawn(settle, settled):
            settled.set()

    try:
        launched = await memory.launch(session, tidy_text(scope, groups), on_finish,
                                       holder=token, tidy=prepare)
    except (OSError, PoolRefused) as exc:
        memory.bounds.release(session.id, token)
        announced.set()
        return [f"The tidy run of {scope}: could not start: {exc}"]
    runs.append(launched)
    try:
        await send_update(memory.clock, notify, {
            "status": "started", "taskId": launched.task.id,
            "childSessionId": launched.child_id, "_meta": kind_meta("tidy")})
    finally:
        announced.set()
    await settled.wait()
    record, made = launched.task.record, proposals[0]
    lines = outcome_lines(TidyOutcome(scope, len(groups), report_of(launched.task),
                                      list(made.held), list(made.made), list(made.refused)),
                          "/memory")
    if record.status != "succeeded":  # what it held before it ended stays held
        return [f"The tidy run of {scope}: {record.status}: {run_reason(record)}", *lines]
    return lines


def tidy_command(cfg: Config, paths: Paths, scope: str, *, apply: bool, as_json: bool) -> int:
    """`acp-memory notes tidy [SCOPE:] [--apply] [--json]`: one tidy run over the root, its
    proposals held (`notes pending`) or, with --apply, made; what it did on stdout."""
    async def run() -> TidyOutcome:
        with MemoryStore.from_config(cfg, paths, paths.cwd, source=TIDY_SOURCE) as store:
            async with ProviderHub(cfg) as hub:
                return await tidy_root(
                    cfg, paths, store, scope, apply=apply,
                    model_for=partial(hub.model, wait_for_limit_reset=False))

    try:
        outcome = anyio.run(run)
    except (NoteError, LLMError) as exc:
        print(f"acp-memory notes: tidy: {exc}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(outcome.as_json(), ensure_ascii=False))
        return 0
    print("\n".join(outcome_lines(outcome)))
    return 0


def outcome_lines(outcome: TidyOutcome, approve: str = "acp-memory notes") -> list[str]:
    """What a tidy run did, for people: each proposal held or made, then what to do next
    (`approve`: the command that approves, `/memory` in a session)."""
    if not outcome.groups:
        return [NOTHING_TO_TIDY]
    lines = [f"{outcome.scope}: {outcome.groups} candidate group(s)"]
    for held in outcome.held:
        state = "made" if held in outcome.made else "held"
        shown = ", ".join(f"{p.action} {held.scope}:{p.path}" for p in held.all_parts)
        lines.append(f"{state} {held.id}: {shown}; why: {held.reason}")
    lines += [f"not made: {line}" for line in outcome.refused]
    if not outcome.held:
        lines.append("nothing proposed")
    elif any(h not in outcome.made for h in outcome.held):
        lines.append(f"approve with `{approve} approve ID|all`, or reject")
    return lines


async def _ignored(event: TurnEvent) -> None:
    """The child's events: its bundle keeps its transcript, nobody watches it stream."""


class TidyPasses:
    """The background pass of each root every `memory.tidy.every_hours` (0: never), in the
    runner's task group: one loop per root, started when a session first opens on it, so
    passes of a root run one at a time; each holds its proposals."""

    def __init__(self, memory: MemoryService) -> None:
        self.memory = memory
        self._roots: set[str] = set()

    def opened(self, cwd: str) -> None:
        """A session opened in cwd: its roots' loops started, once per root."""
        every = self.memory.cfg.memory.tidy.every_hours
        if not every:
            return
        roots = Roots.from_config(self.memory.cfg, self.memory.paths, Path(cwd))
        for scope in roots.scopes():
            key = str(roots.root_of(scope))
            if key not in self._roots:
                self._roots.add(key)
                self.memory.host.owner().start_soon(self._loop, cwd, scope, every * 3600)

    async def _loop(self, cwd: str, scope: str, every_s: float) -> None:
        while True:
            with self.memory.clock.move_on_after(every_s):  # the runner's clock: tests move it
                await anyio.sleep_forever()
            try:
                outcome = await self.pass_once(cwd, scope)
            except Exception as exc:  # a failed pass is a log line; the next one comes anyway
                log.warning("the background tidy of %s: failed: %s", scope, exc)
            else:
                log.info("the background tidy of %s: %s", scope,
                         "; ".join(outcome_lines(outcome)))

    async def pass_once(self, cwd: str, scope: str) -> TidyOutcome:
        """One background pass over scope's root of cwd, its proposals held."""
        memory = self.memory
        with memory.store_for(cwd, TIDY_SOURCE) as store:
            return await tidy_root(memory.cfg, memory.paths, store, scope, apply=False,
                                   model_for=memory.host.model_for)
