"""Templates under prompts.dir that print per-step values ({{now}}, {{background_tasks}}): their
system message is rendered again at every step, their turn context carries the memory report
alone; the built-in templates keep a system message that never moves."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from engine.turnkit import (
    TickingClock,
    check_turn_context,
    fake_config,
    is_turn_context,
    prompt,
    turn_agent,
    turn_context_text,
)
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from runtime.test_memory_run import MemoryRoutedOpenAI, memory_config

from acp_memory.config.models import MemoryConfig, PromptsConfig
from acp_memory.engine.prompt import (
    STEP_PLACEHOLDERS,
    TURN_CONTEXT_NOTE,
    TURN_CONTEXT_OPEN,
    TurnContext,
    render_system,
)

pytestmark = pytest.mark.anyio

TEMPLATES = Path(__file__).resolve().parents[2] / "prompts"
PER_STEP = "Clock: {{now}}\nTasks:\n{{background_tasks}}\nTools:\n{{tools}}\n"
REPORT = "Already on disk:\n- The user's favourite fruit is the mango."


def _override(tmp_path: Path, body: str = PER_STEP) -> str:
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "agent.md").write_text(body, encoding="utf-8")
    return str(folder)


async def test_a_template_printing_now_is_rendered_again_at_every_step(paths, tmp_path):
    (paths.cwd / "a.txt").write_text("a\n")
    async with FakeOpenAI() as server:
        server.script(tool_calls(call("list_directory", {})), text("Done."), text("Again."))
        cfg = fake_config(server.base_url, prompts_dir=_override(tmp_path))
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await prompt(ed, sid, "look")
            await prompt(ed, sid, "again")
        requests = server.requests

    systems = [r.messages[0]["content"] for r in requests]
    for n, system in enumerate(systems, start=1):
        assert system.startswith(f"Clock: {TickingClock.stamp(n)}\nTasks:\nnone running\n")
    assert len(set(systems)) == 3
    # No memory report, so no turn-context block at all: the clock is in the system message.
    for request in requests:
        assert not any(is_turn_context(m) for m in request.messages)
    assert requests[0].messages[-1] == {"role": "user", "content": "look"}
    assert requests[1].messages[-1]["role"] == "tool"


async def test_a_per_step_template_gets_the_memory_report_alone_after_the_history(
    paths, tmp_path
):
    async with MemoryRoutedOpenAI() as server:
        server.child = [text(REPORT)]
        server.script(text("Mango."))
        cfg = memory_config(server)
        cfg.prompts = PromptsConfig(dir=_override(tmp_path))
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "What is my favourite fruit?") == "end_turn"
        (parent,) = server.parent_requests

    assert turn_context_text(parent) == "\n".join(
        [f"{TURN_CONTEXT_OPEN} {TURN_CONTEXT_NOTE}", "", "## Long-term memory", REPORT,
         "</turn_context>"]
    )
    system = parent.messages[0]["content"]
    # The memory child reads the same clock, so which tick the parent got is not fixed.
    assert re.match(r"Clock: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\nTasks:\nnone running\n", system)
    assert "mango" not in system


async def test_built_in_templates_keep_one_system_message_across_steps_and_turns(paths):
    (paths.cwd / "memory").mkdir()
    (paths.cwd / "memory" / "style.md").write_text("Tabs.")
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("list_directory", {})),
            tool_calls(call("read_file", {"path": "memory/style.md"})),
            text("Tabs."),
            text("Bye."),
        )
        cfg = fake_config(server.base_url)
        cfg.memory = MemoryConfig(inline=True)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await prompt(ed, sid, "style?")
            await prompt(ed, sid, "thanks")
        requests = server.requests

    assert len(requests) == 4
    assert len({r.messages[0]["content"] for r in requests}) == 1
    assert "Tabs." in requests[0].messages[0]["content"]  # the inline snapshot, held still
    for n, request in enumerate(requests, start=1):
        check_turn_context(turn_context_text(request))  # the clock and the tasks live here
        assert TickingClock.stamp(n) in turn_context_text(request)
    for template in TEMPLATES.glob("*.md"):
        body = template.read_text(encoding="utf-8")
        assert not any(slot in body for slot in STEP_PLACEHOLDERS), template.name


def test_background_tasks_print_one_line_each_and_values_are_not_expanded_again() -> None:
    step = TurnContext(
        background_tasks=["bg_1 running 4s: make test"],
        now=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    out = render_system(
        "{{now}} | {{background_tasks}} | {{memory}} | {{unknown}}",
        cwd="/w",
        tools=[],
        memory="a note mentioning {{now}}",
        step=step,
    )
    assert out == (
        "2030-01-02T03:04:05Z | - bg_1 running 4s: make test | a note mentioning {{now}} | "
        "{{unknown}}"
    )
    # Without a step, a template's placeholders for per-step values stay as written.
    assert render_system("{{now}}", cwd="/w", tools=[], memory="") == "{{now}}"


def test_the_sessions_additional_directories_follow_its_working_directory() -> None:
    text = render_system("Working directory: {{cwd}}\nTools:", cwd="/w", tools=[], memory="",
                         additional_directories=["/data", "/docs"])
    assert text == "Working directory: /w\nAlso in the workspace: /data, /docs\nTools:"
    alone = render_system("Working directory: {{cwd}}", cwd="/w", tools=[], memory="")
    assert alone == "Working directory: /w"
