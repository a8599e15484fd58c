"""The memory subagent's launch pieces: its prompt, its task text, its tools and its models."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from acp_memory.build import build_runner
from acp_memory.config import Paths
from acp_memory.config.models import Config, MemoryConfig
from acp_memory.engine.prompt import Templates, render_system
from acp_memory.llm.registry import ProviderHub
from acp_memory.llm.types import ToolCall
from acp_memory.memory.store import MemoryStore
from acp_memory.runtime.memory_agent import (
    MEMORY_TEMPLATE,
    MEMORY_TOOLS,
    OPERATOR_HEADING,
    READ_TOOLS,
    MemoryLaunch,
    MemoryTemplates,
    memory_max_turns,
    memory_model_chain,
    memory_model_id,
    memory_model_warnings,
    memory_tool_set,
    operator_instructions,
)
from acp_memory.text.task_text import TASK_TEXT_BYTES
from acp_memory.tools.base import ToolContext

ROLE = "You are the memory subagent of acp-memory."
CTX = ToolContext(session_id="sess_test", cwd=Path("/"), mode="ask")


def system_template(templates: Templates, *, read_only: bool, additional: str, cut: int) -> str:
    """The child's template as its engine loads it, before {{cwd}}, {{tools}} and {{memory}}."""
    memory = MemoryConfig(additional_prompt=additional, additional_prompt_max_chars=cut)
    launch = MemoryTemplates.for_launch(templates, memory, read_only=read_only)
    return launch.load(MEMORY_TEMPLATE)


def rendered(store: MemoryStore, *, read_only: bool, additional: str = "", cut: int = 0) -> str:
    template = system_template(Templates(), read_only=read_only, additional=additional, cut=cut)
    tools = memory_tool_set(store, MemoryConfig(), read_only=read_only)
    return render_system(template, cwd="/work", tools=tools.specs(), memory="")


def test_operator_instructions_sit_between_the_memory_role_and_the_tool_list(
    store: MemoryStore,
) -> None:
    text = rendered(store, read_only=False, additional="Write every note in Russian.")
    role, operator = text.index(ROLE), text.index(OPERATOR_HEADING)
    tools = text.index("## Tools\n- memory_search:")
    assert role < text.index("## Rules") < operator < tools
    assert text[operator:tools].strip() == f"{OPERATOR_HEADING}\nWrite every note in Russian."
    assert text.count(OPERATOR_HEADING) == 1


def test_without_additional_prompt_there_is_no_operator_section(store: MemoryStore) -> None:
    text = rendered(store, read_only=False, additional="   \n")
    assert OPERATOR_HEADING not in text and "{{" not in text


def test_the_prompt_states_both_modes_the_report_format_and_the_rules(
    store: MemoryStore,
) -> None:
    text = rendered(store, read_only=False)
    for needle in (
        "## Recall (the default)",
        "## Persist",
        "never both in one run",
        "Already on disk:",
        "Not in notes:",
        "no paths, no file names",
        'report it as "possibly stale: ..." followed by why',
        '"cites PATH: not in the workspace"',
        'mark it "(old)"',
        "(no memory hits)",
        "English keywords",
        "memory_list",
        "scope:path",
        "Markdown links",
        "Read first",
        "memory_mkdir",
        "verified, saved, skipped",
        "keys, tokens, passwords",
        "not to consult memory",
        "answering the user's request is the main assistant's job",
        "Working directory of the session: /work",
    ):
        assert needle in text, needle
    assert "\n(no memory hits)\n" in text  # on a line of its own, to be copied exactly


def test_the_recall_rule_reports_the_newer_of_two_values_with_the_olders_date(
    store: MemoryStore,
) -> None:
    text = rendered(store, read_only=False)
    recall = text[text.index("## Recall (the default)"):text.index("## Persist")]
    assert "When two notes give one subject different values, report only the newer" in recall
    assert '"(newer than a note of YYYY-MM-DD that says ...)"' in recall


def test_a_long_additional_prompt_is_cut_with_a_warning_at_every_launch(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemoryConfig(additional_prompt="Keep it short. " + "x" * 500,
                          additional_prompt_max_chars=20)
    with caplog.at_level(logging.WARNING, logger="acp_memory.runtime.memory_agent"):
        first = MemoryTemplates.for_launch(Templates(), memory, read_only=False)
        for _ in range(3):  # the engine re-reads the template every step: no new warning
            text = first.load("memory_agent.md")
        MemoryTemplates.for_launch(Templates(), memory, read_only=False)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, "one warning per launch"
    assert "additional_prompt_max_chars" in warnings[0].getMessage()
    assert f"{OPERATOR_HEADING}\nKeep it short. xxxxx\n" in text
    assert "x" * 6 not in text


def test_operator_instructions_are_whole_when_the_cap_is_zero_or_not_reached() -> None:
    assert operator_instructions("abc", 0) == ("abc", False)
    assert operator_instructions("abc", 3) == ("abc", False)
    assert operator_instructions("abcd", 3) == ("abc", True)


def test_ask_mode_says_saving_is_unavailable_and_offers_three_tools(store: MemoryStore) -> None:
    tools = memory_tool_set(store, MemoryConfig(), read_only=True)
    assert tools.names() == list(READ_TOOLS)
    text = rendered(store, read_only=True, additional="Notes are in English.")
    assert "saving is unavailable" in text
    assert text.index("saving is unavailable") < text.index(OPERATOR_HEADING)
    assert "- memory_save:" not in text and "- memory_delete:" not in text
    assert "saving is unavailable" not in rendered(store, read_only=False)


def test_agent_mode_has_exactly_the_six_memory_tools(store: MemoryStore) -> None:
    assert sorted(memory_tool_set(store, MemoryConfig(), read_only=False).names()) == sorted(
        MEMORY_TOOLS
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("memory_save", {"title": "t", "body": "b", "scope": "global"}),
        ("memory_delete", {"path": "global:t.md"}),
        ("memory_mkdir", {"path": "global:folder"}),
    ],
)
async def test_a_write_in_ask_mode_is_refused_before_it_runs(
    store: MemoryStore, name: str, args: dict[str, str]
) -> None:
    store.roots.global_root.mkdir(parents=True, exist_ok=True)
    (store.roots.global_root / "t.md").write_text("keep me")
    tools = memory_tool_set(store, MemoryConfig(), read_only=True)
    prepared = tools.prepare(ToolCall("c1", name, json.dumps(args)))
    assert prepared.problem is not None and prepared.problem.is_error
    assert f"no tool named {name!r}" in prepared.problem.text
    assert "saving is unavailable" in prepared.problem.text
    result = await tools.run(prepared, CTX)
    assert result.is_error
    visible = [p.name for p in store.roots.global_root.iterdir() if not p.name.startswith(".")]
    assert visible == ["t.md"]
    assert (store.roots.global_root / "t.md").read_text() == "keep me"


def test_a_prompts_dir_override_gets_the_sections_before_its_own_tool_list(
    tmp_path: Path,
) -> None:
    override = tmp_path / "prompts"
    override.mkdir()
    (override / "memory_agent.md").write_text("Custom memory role.\n\nTools:\n{{tools}}\n")
    text = system_template(Templates(str(override)), read_only=True, additional="Be brief.", cut=0)
    assert text.startswith("Custom memory role.\n\n## Ask mode: saving is unavailable\n")
    assert text.endswith(f"{OPERATOR_HEADING}\nBe brief.\n\nTools:\n{{{{tools}}}}\n")


def test_a_template_without_a_tool_list_gets_the_sections_at_its_end(tmp_path: Path) -> None:
    (tmp_path / "memory_agent.md").write_text("Only a role.\n")
    text = system_template(Templates(str(tmp_path)), read_only=False, additional="Be brief.", cut=0)
    assert text == f"Only a role.\n\n{OPERATOR_HEADING}\nBe brief.\n"


def memory_task_text(store: MemoryStore, message: str) -> str:
    """The child's task as a launch prepares it (the one 32 KiB rule spawn_agent uses too)."""
    launch = MemoryLaunch.prepare(
        _config(), Templates(), store, message=message, session_mode="agent",
        session_model_id="fast/small",
    )
    return launch.task


def test_the_task_text_is_cut_at_32_kib_on_a_character_boundary(store: MemoryStore) -> None:
    # One ASCII byte first, so that 32 KiB falls in the middle of a two-byte letter.
    message = "a" + "я" * 20_000
    task = memory_task_text(store, message)
    kept, marker = task.split("\n\n", 1)
    assert message.startswith(kept)
    assert len(kept.encode("utf-8")) == TASK_TEXT_BYTES - 1
    assert marker == (
        "[acp-memory: the message was cut here, after 32767 of its 40001 bytes of UTF-8]"
    )


def test_an_ascii_message_over_32_kib_is_cut_too(store: MemoryStore) -> None:
    message = "a" * TASK_TEXT_BYTES + "b" * 100
    task = memory_task_text(store, message)
    assert task == "a" * TASK_TEXT_BYTES + (
        "\n\n[acp-memory: the message was cut here, after 32768 of its 32868 bytes of UTF-8]"
    )


def test_a_task_of_at_most_32_kib_is_the_message_itself(store: MemoryStore) -> None:
    exact = "ж" * (TASK_TEXT_BYTES // 2)
    assert memory_task_text(store, exact) == exact
    assert memory_task_text(store, "Remember that I prefer tabs.") == "Remember that I prefer tabs."


def test_a_lone_surrogate_in_a_long_message_costs_a_cut_not_a_crash(store: MemoryStore) -> None:
    task = memory_task_text(store, "\ud800" + "b" * TASK_TEXT_BYTES)
    assert task.startswith("\ud800b") and "was cut here" in task


def _config(**memory: object) -> Config:
    return Config.model_validate(
        {
            "models": [{"model": "fast/small"}, {"model": "big/large", "max_tokens": 2000},
                       {"model": "spare/one"}],
            "memory": memory,
        }
    )


def test_the_memory_model_is_memory_model_when_configured_else_the_sessions() -> None:
    assert memory_model_id(_config(model="fast/small"), "big/large") == "fast/small"
    assert memory_model_id(_config(model="nowhere/x"), "big/large") == "big/large"
    assert memory_model_id(_config(), "big/large") == "big/large"


def test_the_model_chain_ends_with_the_sessions_model_and_has_no_repeats() -> None:
    cfg = _config(model="fast/small",
                  fallback_models=["spare/one", "nowhere/x", "fast/small", "spare/one"])
    assert memory_model_chain(cfg, "session/own") == ["fast/small", "spare/one", "session/own"]
    # Listed among the fallbacks, the session's model is tried once, where it is listed.
    cfg = _config(model="fast/small", fallback_models=["big/large", "spare/one"])
    assert memory_model_chain(cfg, "big/large") == ["fast/small", "big/large", "spare/one"]
    assert memory_model_chain(_config(), "big/large") == ["big/large"]


def test_the_built_in_offline_model_is_always_a_memory_model_and_a_fallback() -> None:
    # models[] does not list it, and a run still takes it rather than the session's model.
    cfg = _config(model="offline/default", fallback_models=["offline/default"])
    assert memory_model_id(cfg, "big/large") == "offline/default"
    cfg = _config(model="fast/small", fallback_models=["offline/default"])
    assert memory_model_chain(cfg, "big/large") == ["fast/small", "offline/default", "big/large"]
    assert memory_model_warnings(cfg) == []


def test_a_memory_model_or_fallback_naming_no_model_is_a_warning() -> None:
    cfg = _config(model="x/y", fallback_models=["spare/one", "nowhere/z"])
    assert memory_model_warnings(cfg) == [
        "memory.model 'x/y' is not among models[]: memory runs use the session's model",
        "memory.fallback_models[1] 'nowhere/z' is not among models[]: memory runs skip it",
    ]


@pytest.mark.anyio
async def test_a_memory_model_naming_no_model_is_warned_once_when_the_runner_starts(
    paths: Paths, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = Config.model_validate({"memory": {"model": "x/y"}})
    caplog.set_level(logging.WARNING, "acp_memory")
    async with ProviderHub(cfg) as hub:
        runner = build_runner(cfg, paths, hub)
        async with runner.running():
            pass
    said = [r.getMessage() for r in caplog.records if "memory.model" in r.getMessage()]
    assert said == ["memory.model 'x/y' is not among models[]: memory runs use the session's "
                    "model"]


def test_the_child_step_cap() -> None:
    # Its token cap is the chain's (tests/llm/test_memory_chain.py).
    cfg = _config(recall_max_turns=3, persist_max_turns=9)
    assert memory_max_turns(cfg) == 9
    assert memory_max_turns(_config(recall_max_turns=15, persist_max_turns=9)) == 15
