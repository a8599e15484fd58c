"""The memory subagent's pieces that need no background pool: its prompt, its task text, its
tools, its model chain and its step cap.

The child's system template is `memory_agent.md` (prompts.dir overrides it). Two sections are
added at launch, never written in the file: the ask-mode notice (saving is unavailable) and
the operator's `memory.additional_prompt`. Both go right before the paragraph holding
`{{tools}}`, so they follow the memory role and precede the tool list in any template,
an override included; a template without `{{tools}}` gets them at its end.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from acp_memory.config.models import OFFLINE_MODEL_ID, Config, MemoryConfig
from acp_memory.engine.prompt import Templates
from acp_memory.memory.redact import redact_text
from acp_memory.memory.review import Review
from acp_memory.memory.store import MemoryStore
from acp_memory.memory.tools import memory_tools
from acp_memory.text.task_text import cut_task_text
from acp_memory.tools.registry import ToolSet

log = logging.getLogger(__name__)

MEMORY_TEMPLATE = "memory_agent.md"
# A reflection run's (runtime/reflection.py): the same child on a session's transcript.
REFLECT_TEMPLATE = "reflect_agent.md"
NO_HITS = "(no memory hits)"
READ_TOOLS = ("memory_search", "memory_list", "memory_read")
WRITE_TOOLS = ("memory_mkdir", "memory_save", "memory_delete")
MEMORY_TOOLS = READ_TOOLS + WRITE_TOOLS
TOOLS_SLOT = "{{tools}}"
OPERATOR_HEADING = "## Operator instructions"
READ_ONLY_NOTICE = (
    "## Ask mode: saving is unavailable\n"
    "This session is in ask mode, so long-term memory is read-only here: saving, creating "
    "folders and deleting are unavailable, and only memory_search, memory_list and "
    "memory_read exist. Work in recall mode only, even when the user asks to remember, save, "
    "forget or delete something; then add the line \"Not saved: memory is read-only in ask "
    "mode.\" to your report."
)


def operator_instructions(additional_prompt: str, max_chars: int) -> tuple[str, bool]:
    """memory.additional_prompt, cut at max_chars characters (0 keeps it whole), and whether
    it was cut; a cut is logged as a warning every time, since every launch reads it."""
    text = additional_prompt.strip()
    if max_chars and len(text) > max_chars:
        log.warning(
            "memory.additional_prompt is %d characters; the memory subagent gets the first %d "
            "(memory.additional_prompt_max_chars)",
            len(text),
            max_chars,
        )
        return text[:max_chars].rstrip(), True
    return text, False


def compose_memory_template(template: str, *, read_only: bool, operator: str) -> str:
    """The template with the ask-mode notice and the Operator instructions section inserted
    before the tool list (see the module docstring)."""
    sections: list[str] = []
    if read_only:
        sections.append(READ_ONLY_NOTICE)
    if operator.strip():
        sections.append(f"{OPERATOR_HEADING}\n{operator.strip()}")
    if not sections:
        return template
    blocks = template.split("\n\n")
    at = next((i for i, b in enumerate(blocks) if TOOLS_SLOT in b), None)
    if at is None:
        return template.rstrip("\n") + "\n\n" + "\n\n".join(sections) + "\n"
    return "\n\n".join([*blocks[:at], *sections, *blocks[at:]])


class MemoryTemplates(Templates):
    """The templates a memory child's engine loads: memory_agent.md with its launch sections.

    Made once per launch, so the operator text is read (and a cut warned about) once per
    launch, while the template file itself is read again whenever it changed, like any other
    (the base's cache).
    """

    def __init__(self, base: Templates, *, read_only: bool, operator: str) -> None:
        # No super().__init__(): it looks up the template folders, and the base has them.
        self.base = base
        self.read_only = read_only
        self.operator = operator

    @classmethod
    def for_launch(
        cls, base: Templates, memory: MemoryConfig, *, read_only: bool
    ) -> MemoryTemplates:
        operator, _ = operator_instructions(
            memory.additional_prompt, memory.additional_prompt_max_chars
        )
        return cls(base, read_only=read_only, operator=operator)

    def load(self, name: str) -> str:
        return self._composed(name, self.base.load(name))

    def cached(self, name: str) -> str | None:
        text = self.base.cached(name)
        return None if text is None else self._composed(name, text)

    def _composed(self, name: str, text: str) -> str:
        if name not in (MEMORY_TEMPLATE, REFLECT_TEMPLATE):
            return text
        return compose_memory_template(text, read_only=self.read_only, operator=self.operator)


def memory_tool_set(
    store: MemoryStore, memory: MemoryConfig, *, read_only: bool, review: Review | None = None
) -> ToolSet:
    """The child's tools: the six memory tools, or search, list and read in ask mode; with
    review (memory.review: ask), saves and deletes ask the user first.

    A write asked for in ask mode is refused before it runs: it is not in the set, and the
    set's label makes the error say why.
    """
    tools = memory_tools(store, memory, review)
    if read_only:
        label = "the memory subagent in ask mode (memory is read-only; saving is unavailable)"
        return ToolSet([t for t in tools if t.name in READ_TOOLS], label)
    return ToolSet(tools, "the memory subagent")


def is_memory_model(cfg: Config, model_id: str) -> bool:
    """Whether memory.model or a fallback may name this model: a configured one, or the
    built-in offline model, which is always there."""
    return model_id == OFFLINE_MODEL_ID or model_id in cfg.model_ids()


def memory_model_id(cfg: Config, session_model_id: str) -> str:
    """memory.model when it names a model (is_memory_model), else the session's model."""
    wanted = cfg.memory.model.strip()
    return wanted if wanted and is_memory_model(cfg, wanted) else session_model_id


def memory_model_chain(cfg: Config, session_model_id: str) -> list[str]:
    """The models a run tries in order: memory_model_id, then those of
    memory.fallback_models that name a model, then the session's model as the last resort;
    no repeats."""
    chain = [memory_model_id(cfg, session_model_id)]
    chain += [m.strip() for m in cfg.memory.fallback_models if is_memory_model(cfg, m.strip())]
    chain.append(session_model_id)
    return list(dict.fromkeys(chain))


def memory_model_warnings(cfg: Config) -> list[str]:
    """A line for memory.model and each fallback naming no model: a run passes them over
    (the start's log and `doctor` say so, never silent)."""
    lines = []
    wanted = cfg.memory.model.strip()
    if wanted and not is_memory_model(cfg, wanted):
        lines.append(f"memory.model {wanted!r} is not among models[]: memory runs use the "
                     "session's model")
    for index, model in enumerate(cfg.memory.fallback_models):
        if model.strip() and not is_memory_model(cfg, model.strip()):
            lines.append(f"memory.fallback_models[{index}] {model.strip()!r} is not among "
                         "models[]: memory runs skip it")
    return lines


def memory_max_turns(cfg: Config) -> int:
    """The child's step cap: one run may be a recall or a persist, decided by the child."""
    return max(cfg.memory.recall_max_turns, cfg.memory.persist_max_turns)


@dataclass(frozen=True)
class MemoryLaunch:
    """What one run of the child needs, decided before it starts."""

    task: str
    tools: ToolSet
    templates: MemoryTemplates
    models: list[str]
    max_turns: int
    read_only: bool
    template: str = MEMORY_TEMPLATE

    @classmethod
    def prepare(
        cls,
        cfg: Config,
        templates: Templates,
        store: MemoryStore,
        *,
        message: str,
        session_mode: str,
        session_model_id: str,
        review: Review | None = None,
        reflect: bool = False,
    ) -> MemoryLaunch:
        """The launch for a user message of a session in session_mode on session_model_id;
        review asks the user before each save and delete (memory.review: ask). A reflection
        (reflect) runs on reflect_agent.md, its message a transcript already cut to
        memory.reflect.max_chars and redacted."""
        read_only = session_mode == "ask"
        return cls(
            # Redacted before the child reads it: a secret it never sees reaches none of the
            # run's files in any form (a lowercased search, a split token), nor a note.
            task=message if reflect else cut_task_text(redact_text(message)),
            tools=memory_tool_set(store, cfg.memory, read_only=read_only, review=review),
            templates=MemoryTemplates.for_launch(templates, cfg.memory, read_only=read_only),
            models=memory_model_chain(cfg, session_model_id),
            max_turns=memory_max_turns(cfg),
            read_only=read_only,
            template=REFLECT_TEMPLATE if reflect else MEMORY_TEMPLATE,
        )
