"""The offline model as the memory subagent, driven through the real turn engine with the real
memory tools on a real note store; and as the main agent, answering from a memory report."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import httpx
import pytest
from fakes.streams import calls_of, collect, text_of

from acp_memory.config import Paths
from acp_memory.config.models import OFFLINE_MODEL_ID, Config, ProviderConfig
from acp_memory.engine.events import AgentText
from acp_memory.engine.prompt import Templates, TurnContext
from acp_memory.engine.turn import TurnEngine, TurnSetup
from acp_memory.llm.offline.provider import OfflineProvider
from acp_memory.llm.registry import ProviderHub, build_provider
from acp_memory.llm.types import ChatRequest, Message, ToolSpec
from acp_memory.memory.store import MemoryStore
from acp_memory.runtime.memory_agent import NO_HITS, MemoryLaunch
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import SessionStore
from acp_memory.tools.registry import ToolRegistry

pytestmark = pytest.mark.anyio
RUN_BOUND_S = 10
CFG = Config()


@dataclass
class Run:
    report: str
    messages: list[TranscriptMessage]
    chunks: list[AgentText]  # every text chunk the run streamed

    def calls(self) -> list[str]:
        return [c.name for m in self.messages for c in m.tool_calls or ()]


@pytest.fixture
def store(paths: Paths) -> Iterator[MemoryStore]:
    with MemoryStore.from_config(CFG, paths, paths.cwd) as store:
        yield store


@pytest.fixture
def child(paths: Paths, store: MemoryStore):  # type: ignore[no-untyped-def]
    """Runs one memory child turn on the offline model; returns its report and transcript."""

    async def run(message: str, mode: str = "agent") -> Run:
        launch = MemoryLaunch.prepare(
            CFG, Templates(), store, message=message, session_mode=mode,
            session_model_id=OFFLINE_MODEL_ID,
        )
        session = SessionStore(paths.sessions_dir).create(
            cwd=str(paths.cwd), model_id=OFFLINE_MODEL_ID
        )
        engine = TurnEngine(launch.templates, ToolRegistry(), launch.max_turns)
        setup = TurnSetup(tools=launch.tools, template=launch.template, max_turns=launch.max_turns)
        chunks: list[AgentText] = []

        async def emit(event: object) -> None:
            if isinstance(event, AgentText):
                chunks.append(event)

        try:
            with anyio.fail_after(RUN_BOUND_S):
                stop = await engine.run(
                    session, launch.task, ProviderHub(CFG).model(launch.models[0]), emit, setup
                )
        finally:
            session.close()
        assert stop == "end_turn"
        last = session.messages[-1]
        assert last.role == "assistant" and not last.tool_calls
        return Run(last.content, session.messages, chunks)

    return run


def notes(root: Path) -> dict[str, str]:
    """Every note under a root, by its path relative to the root."""
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.md"))}


async def test_a_seeded_fact_is_recalled_as_a_plain_fact_without_paths(child, store) -> None:
    note = "# Editor\n\n- I prefer tabs over spaces.\n- Mono font, size 12.\n"
    store.write("global:prefs/editor.md", note)
    run = await child("Do I prefer tabs or spaces?")
    assert run.report == "Already on disk:\n- I prefer tabs over spaces."
    assert run.calls() == ["memory_search", "memory_read"]
    for leak in ("global", "prefs", "editor", ".md"):
        assert leak not in run.report


@pytest.mark.parametrize("older_name", ["deploy.md", "deploy-day.md"])
async def test_a_recall_gives_the_newer_of_two_values_with_the_older_notes_date_and_value(
    child, store, older_name
) -> None:
    # Either note may come first from the search: the older one's value is never current.
    newer_name = ({"deploy.md", "deploy-day.md"} - {older_name}).pop()
    root = store.roots.global_root
    root.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    for name, value, days in ((older_name, "Friday", 30), (newer_name, "Thursday", 2)):
        (root / name).write_text(f"Deploy day is {value}.\n")
        when = (now - timedelta(days=days)).timestamp()
        os.utime(root / name, (when, when))
    older_day = (now - timedelta(days=30)).date().isoformat()
    run = await child("Which deploy day do we have?")
    assert run.calls() == ["memory_search", "memory_read", "memory_read"]
    assert run.report == (
        "Already on disk:\n"
        f"- Deploy day is Thursday. (newer than a note of {older_day} that says Friday)"
    )


async def test_the_memory_child_streams_its_report_a_whole_line_at_a_time(child, store) -> None:
    store.write("global:prefs/editor.md", "# Editor\n\n- I prefer tabs over spaces.\n")
    run = await child("Do I prefer tabs or spaces?")
    last_id = run.chunks[-1].message_id
    assert [c.text for c in run.chunks if c.message_id == last_id] == [
        "Already on disk:\n",
        "- I prefer tabs over spaces.",
    ]


async def test_nothing_on_disk_is_exactly_no_memory_hits_after_a_listing(child) -> None:
    run = await child("Which database does the billing service use?")
    assert run.report == NO_HITS == "(no memory hits)"
    # The first search found nothing, so the run looked at the folders before giving up.
    assert run.calls() == ["memory_search", "memory_list"]


@pytest.mark.parametrize("scope", ["project", "workspace"])
async def test_a_recall_follows_scope_links_inside_the_notes_it_opens(
    child, store, scope
) -> None:
    store.write("project:deploy.md", f"Deploys follow [the runbook]({scope}:ops/runbook.md).\n")
    store.write("project:ops/runbook.md", "Run make release from the main branch.\n")
    run = await child("How do we deploy?")
    assert run.calls() == ["memory_search", "memory_read", "memory_read"]
    assert "- Deploys follow the runbook." in run.report
    assert "- Run make release from the main branch." in run.report
    assert "ops" not in run.report and f"{scope}:" not in run.report


async def test_remember_saves_the_sentence_to_the_global_root(child, paths, store) -> None:
    run = await child("Remember that I prefer tabs. Thanks!")
    assert notes(store.roots.global_root) == {"i-prefer-tabs.md": "I prefer tabs.\n"}
    assert notes(paths.cwd / "memory") == {}
    assert run.report == "Saved to global memory: I prefer tabs."
    # Read first: what is already there, and which names the root holds.
    assert run.calls() == ["memory_search", "memory_list", "memory_save"]


async def test_a_fact_for_this_project_is_saved_to_the_project_root(child, paths, store) -> None:
    run = await child("For this project, remember that we deploy on Fridays.")
    saved = notes(paths.cwd / "memory")
    assert list(saved.values()) == ["For this project, we deploy on Fridays.\n"]
    assert notes(store.roots.global_root) == {}
    assert run.report == "Saved to project memory: For this project, we deploy on Fridays."


async def test_a_russian_request_to_remember_saves_the_fact(child, store) -> None:
    run = await child("Запомни, что я пишу код в Helix.")
    assert list(notes(store.roots.global_root).values()) == ["Я пишу код в Helix.\n"]
    assert run.report == "Saved to global memory: Я пишу код в Helix."


async def test_a_600_character_cyrillic_fact_is_saved_whole(child, store) -> None:
    fact = ("Сервис заявок хранит историю клиентов и отправляет отчёты по пятницам, " * 9).strip()
    fact = fact[:599].rstrip() + "."
    assert len(fact) >= 590
    await child(f"Запомни: {fact}")
    (body,) = notes(store.roots.global_root).values()
    assert body == fact + "\n"


@pytest.mark.parametrize(
    ("message", "saved"),
    [
        (
            "The deploy codeword is PURPLE-HAT-42; this fact should be remembered for future "
            "sessions.",
            "The deploy codeword is PURPLE-HAT-42.",
        ),
        (
            "The deploy codeword is PURPLE-HAT-42. This should be remembered.",
            "The deploy codeword is PURPLE-HAT-42.",
        ),
        ("From now on, answer in British English.", "From now on, answer in British English."),
        ("Going forward, we squash every merge.", "Going forward, we squash every merge."),
        ("Keep this in memory: the build uses Bazel.", "the build uses Bazel."),
        ("For later: the API token rotates on Mondays.", "the API token rotates on Mondays."),
        ("На будущее: сервер называется bramble.", "сервер называется bramble."),
        (
            "Кодовое слово — ЗЕЛЁНЫЙ-КИТ-7, это нужно знать для будущих сессий.",
            "Кодовое слово — ЗЕЛЁНЫЙ-КИТ-7.",
        ),
        ("Впредь отвечай по-русски.", "Впредь отвечай по-русски."),
        ("Отныне мы пишем тесты первыми.", "Отныне мы пишем тесты первыми."),
    ],
)
async def test_a_message_meant_to_last_saves_the_sentence_carrying_the_fact(
    child, store, message, saved
) -> None:
    run = await child(message)
    assert list(notes(store.roots.global_root).values()) == [saved + "\n"]
    assert run.report == f"Saved to global memory: {saved}"


async def test_a_lasting_line_that_points_back_keeps_the_fact_it_points_to(
    child, store
) -> None:
    # The reference agent's memory script: "this fact" is the sentence before it.
    message = (
        "Pick a fruit and state it as a single sentence that includes the codeword "
        "MEMFRUIT_7Q2X verbatim.\n"
        "After stating it, add one line explaining that this fact should be remembered.\n"
        "Avoid tools."
    )
    await child(message)
    (body,) = notes(store.roots.global_root).values()
    assert body == message + "\n"
    recalled = await child("What is the fruit codeword?")  # a fresh session's run
    assert "MEMFRUIT_7Q2X" in recalled.report, recalled.report


async def test_a_pointing_back_note_keeps_the_nearest_sentences_within_its_bound(
    child, store
) -> None:
    filler = [f"Filler sentence {n} says nothing much at all. " * 6 for n in range(40)]
    lasting = "The codeword is MEMFRUIT_8K3Z; add a line saying that this should be remembered."
    await child("\n".join([*filler, lasting]))
    (body,) = notes(store.roots.global_root).values()
    assert body.endswith(lasting + "\n") and "Filler sentence 39" in body
    assert "Filler sentence 0 " not in body and len(body.encode()) <= 4096 + 1


async def test_a_question_about_what_lasts_saves_nothing(child, store) -> None:
    run = await child("What should be remembered for future sessions?")
    assert notes(store.roots.global_root) == {}
    assert "memory_save" not in run.calls()


async def test_a_fact_already_on_disk_is_verified_and_skipped(child, store) -> None:
    store.write("global:editor.md", "I prefer tabs.\n")
    run = await child("Remember that I prefer tabs.")
    assert run.report == "Verified, skipped: already on disk: I prefer tabs."
    assert notes(store.roots.global_root) == {"editor.md": "I prefer tabs.\n"}


async def test_a_new_fact_whose_name_is_taken_gets_a_note_of_its_own(child, store) -> None:
    store.write("global:i-prefer-tabs.md", "Said on Monday.\n")
    await child("Remember that I prefer tabs!")
    assert notes(store.roots.global_root) == {
        "i-prefer-tabs.md": "Said on Monday.\n",
        "i-prefer-tabs-2.md": "I prefer tabs!\n",
    }


async def test_forget_deletes_the_best_matching_note(child, store) -> None:
    store.write("global:indent.md", "I prefer tabs over spaces.\n")
    store.write("global:drinks.md", "I drink green tea.\n")
    run = await child("Forget that I prefer tabs over spaces.")
    assert notes(store.roots.global_root) == {"drinks.md": "I drink green tea.\n"}
    assert run.report == "Deleted:\n- I prefer tabs over spaces."
    assert run.calls() == ["memory_search", "memory_read", "memory_delete"]


async def test_forget_keeps_the_other_facts_of_the_note(child, store) -> None:
    store.write("global:prefs.md", "# Prefs\n- I prefer tabs.\n- I drink green tea.\n")
    await child("Забудь, что я люблю tabs.")
    assert notes(store.roots.global_root) == {"prefs.md": "# Prefs\n- I drink green tea.\n"}


async def test_forget_deletes_a_note_found_by_its_name_alone(child, store) -> None:
    store.write("global:tabs.md", "Use them everywhere, four wide.\n")
    store.write("global:drinks.md", "I drink green tea.\n")
    run = await child("Forget about tabs.")
    assert notes(store.roots.global_root) == {"drinks.md": "I drink green tea.\n"}
    assert run.report == "Deleted:\n- Use them everywhere, four wide."


async def test_forget_with_nothing_matching_deletes_nothing(child, store) -> None:
    store.write("global:drinks.md", "I drink green tea.\n")
    run = await child("Forget my old phone number.")
    assert run.report.startswith("Nothing deleted")
    assert notes(store.roots.global_root) == {"drinks.md": "I drink green tea.\n"}


@pytest.mark.parametrize(
    "message",
    ["Don't consult memory for this one: what is 2+2?", "Без памяти: сколько будет 2+2?",
     "Не смотри в память, просто ответь."],
)
async def test_not_consulting_memory_is_one_short_line_and_no_tool(child, store, message) -> None:
    store.write("global:maths.md", "2+2 is 4.\n")
    run = await child(message)
    assert run.calls() == []
    assert "\n" not in run.report and len(run.report) < 80 and "not" in run.report


async def test_in_ask_mode_a_request_to_remember_recalls_and_saves_nothing(child, store) -> None:
    store.write("global:editor.md", "I prefer tabs.\n")
    run = await child("Remember that I prefer tabs over spaces.", mode="ask")
    assert notes(store.roots.global_root) == {"editor.md": "I prefer tabs.\n"}
    assert run.report == (
        "Already on disk:\n- I prefer tabs.\nNot saved: memory is read-only in ask mode."
    )
    assert "memory_save" not in run.calls()


@pytest.mark.parametrize("message", ["Save the file, please.", "Delete the build folder."])
async def test_save_or_delete_without_naming_memory_changes_no_note(child, store, message) -> None:
    store.write("global:build.md", "The build folder is out/.\n")
    run = await child(message)
    assert notes(store.roots.global_root) == {"build.md": "The build folder is out/.\n"}
    assert not {"memory_save", "memory_delete"} & set(run.calls())


class MemoryContext:
    """A turn whose memory report is already in."""

    def __init__(self, report: str) -> None:
        self.report = report

    async def begin(self) -> None:
        return None

    def step(self) -> TurnContext:
        return TurnContext(memory_report=self.report)


async def main_answer(paths: Paths, report: str) -> str:
    session = SessionStore(paths.sessions_dir).create(cwd=str(paths.cwd), model_id=OFFLINE_MODEL_ID)
    engine = TurnEngine(Templates(), ToolRegistry(), 4)
    texts: list[str] = []

    async def emit(event: object) -> None:
        if isinstance(event, AgentText):
            texts.append(event.text)

    try:
        with anyio.fail_after(RUN_BOUND_S):
            await engine.run(
                session, "Which indentation do I use?", ProviderHub(CFG).model(OFFLINE_MODEL_ID),
                emit, TurnSetup(context=MemoryContext(report)),
            )
    finally:
        session.close()
    return "".join(texts)


async def test_the_main_agent_answers_from_the_long_term_memory_section(paths) -> None:
    answer = await main_answer(paths, "Already on disk:\n- I prefer tabs over spaces.")
    assert "From memory:\nAlready on disk:\n- I prefer tabs over spaces." in answer
    assert '"Which indentation do I use?"' in answer


async def test_the_main_agent_says_nothing_from_memory_when_there_were_no_hits(paths) -> None:
    answer = await main_answer(paths, NO_HITS)
    assert "From memory" not in answer and NO_HITS not in answer


async def test_the_memory_child_is_told_apart_by_the_tools_it_is_offered() -> None:
    task = Message("user", "/tool read_file\nRemember that I prefer tabs.")
    memory = ChatRequest("default", [task], tools=[ToolSpec("memory_search", "", {})])
    plain = ChatRequest("default", [task], tools=[ToolSpec("read_file", "", {})])
    memory_calls = [c.name for c in calls_of(await collect(OfflineProvider().stream(memory)))]
    plain_calls = [c.name for c in calls_of(await collect(OfflineProvider().stream(plain)))]
    assert memory_calls == ["memory_search"] and plain_calls == ["read_file"]


async def test_the_offline_delay_comes_from_config_and_a_cancel_ends_it() -> None:
    cfg = Config(providers=[ProviderConfig(name="offline", type="offline", delay_ms=60_000)])
    async with httpx.AsyncClient() as client:
        provider = build_provider(cfg, OFFLINE_MODEL_ID, client)
    assert isinstance(provider, OfflineProvider)
    got: list[object] = []

    async def consume() -> None:
        async for event in provider.stream(ChatRequest("default", [Message("user", "hi")])):
            got.append(event)

    with anyio.fail_after(RUN_BOUND_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.wait_all_tasks_blocked()  # the stream is in its delay
            tg.cancel_scope.cancel()
    assert got == []
    # Without a delay, the same request is answered at once.
    fast = await collect(OfflineProvider().stream(ChatRequest("default", [Message("user", "hi")])))
    assert "offline model" in text_of(fast)
