"""Usage and cost where Zed shows them: a usage_update after every model response of a turn,
the prompt answer's per-turn `usage` with the memory run's counted apart in `_meta`, and the
session's cost summed across its turns."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from engine.turnkit import MODEL_ID, fake_config, prompt, turn_agent
from fakes.anthropic_server import FakeAnthropic
from fakes.httpserver import Recorded
from fakes.openai_server import FakeOpenAI
from fakes.script import Reply, call, error, text, tool_calls
from harness import Editor

from acp_memory.config import Config
from acp_memory.config.loader import parse_config, read_raw
from acp_memory.config.models import MemoryConfig, ModelConfig, ModelPrice
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import ChatRequest, Finished, StreamEvent, Usage
from acp_memory.llm.usage import UsageMeter
from acp_memory.llm.windows import context_window

pytestmark = pytest.mark.anyio

WINDOW = 100_000
EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.yaml"


def sized(cfg: Config, **model: Any) -> Config:
    """cfg with its one model given a window (and whatever else `model` sets)."""
    cfg.models = [ModelConfig(model=MODEL_ID, max_tokens=256, context_window=WINDOW, **model)]
    return cfg


def wire_usage_updates(ed: Editor) -> list[dict[str, Any]]:
    """The usage_update payloads exactly as they went out."""
    return [
        m["params"]["update"] for m in ed.checker.sent
        if m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == "usage_update"
    ]


def prompt_answers(ed: Editor) -> list[dict[str, Any]]:
    """The session/prompt results exactly as they went out, in order."""
    return [
        m["result"] for m in ed.checker.sent
        if "result" in m and ed.checker.client_requests.get(m.get("id")) == "session/prompt"
    ]


def usage(tokens_in: int, tokens_out: int, cached: int = 0) -> dict[str, int]:
    return {"inputTokens": tokens_in, "outputTokens": tokens_out, "cachedReadTokens": cached,
            "cachedWriteTokens": 0, "totalTokens": tokens_in + tokens_out}


@pytest.mark.parametrize("fake", [FakeOpenAI, FakeAnthropic])
async def test_every_model_response_sends_a_usage_update_of_its_own_request(paths, fake):
    (paths.cwd / "a.md").write_text("hello\n")
    async with fake() as server:
        server.script(
            tool_calls(call("read_file", {"path": "a.md"})).costing(1200, 95, cached=800),
            text("Read it.").costing(1500, 40, cached=1100),
        )
        kind = "openai" if fake is FakeOpenAI else "anthropic"
        cfg = sized(fake_config(server.base_url, provider_type=kind))
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "read a.md") == "end_turn"
            kinds = ed.client.kinds(sid)
            sent = wire_usage_updates(ed)
            answers = prompt_answers(ed)
    # One per response, the last request's prompt plus its completion; no price, no cost.
    assert sent == [
        {"sessionUpdate": "usage_update", "used": 1295, "size": WINDOW},
        {"sessionUpdate": "usage_update", "used": 1540, "size": WINDOW},
    ]
    # Each right after its response: the first before the tool it asked for runs, the last
    # after the reply's text.
    order = [k for k in kinds if k in ("usage_update", "tool_call", "agent_message_chunk")]
    assert order == ["usage_update", "tool_call", "agent_message_chunk", "usage_update"]
    # The answer: the turn's two calls, cached tokens included (the unstable schema's shape,
    # which the harness checked).
    assert answers == [{"stopReason": "end_turn", "usage": usage(2700, 135, cached=1900)}]


async def test_a_model_of_unknown_window_sends_no_usage_update_and_the_log_says_so_once(
    paths, caplog
):
    caplog.set_level(logging.INFO, logger="acp_memory")
    async with FakeOpenAI(default=text("ok").costing(50, 5)) as server:
        cfg = fake_config(server.base_url)  # fake/m: no context_window, in no table
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "one") == "end_turn"
            assert await prompt(ed, sid, "two") == "end_turn"
            kinds = ed.client.kinds(sid)
            answers = prompt_answers(ed)
    assert "usage_update" not in kinds
    said = [r.getMessage() for r in caplog.records if "context window" in r.getMessage()]
    assert said == [
        f"no usage_update for model {MODEL_ID}: its context window is unknown "
        "(set models[].context_window)"
    ]
    # The answers still carry each turn's tokens.
    assert [a["usage"] for a in answers] == [usage(50, 5), usage(50, 5)]


def test_the_built_in_table_knows_the_offline_model_and_the_example_s_models():
    example = parse_config(read_raw(EXAMPLE) or {}, EXAMPLE)
    assert all(context_window(m) for m in example.models), [m.model for m in example.models]
    assert context_window(ModelConfig(model="offline/default")) == 32_768
    # A dated snapshot holds what its model does; a configured window wins; unknown is None.
    assert context_window(ModelConfig(model="a/claude-sonnet-4-5-20250929")) == 200_000
    assert context_window(ModelConfig(model="o/gpt-4o-2024-08-06")) == 128_000
    assert context_window(ModelConfig(model="o/gpt-4o", context_window=5000)) == 5000
    assert context_window(ModelConfig(model="local/qwen3")) is None


def test_the_meter_counts_cache_writes_and_calls_that_reported_nothing():
    meter = UsageMeter()
    meter.add(Usage(input_tokens=100, output_tokens=10, cache_read_tokens=20,
                    cache_write_tokens=30))
    meter.add(None)  # answered, no usage reported
    assert meter.model_calls == 2
    assert meter.as_json() == {"inputTokens": 100, "outputTokens": 10, "cachedReadTokens": 20,
                               "cachedWriteTokens": 30, "totalTokens": 110}


class VoidUsageProvider:
    """Answers every call with a usage its provider voided."""

    name = "void"

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        yield Finished("stop", None, "a malformed usage block: {}")


async def test_a_meter_no_one_listens_to_logs_a_void_usage_once(caplog):
    # A memory run's meter: one per run, whose child is a session of its own.
    caplog.set_level(logging.WARNING, logger="acp_memory")
    meter = UsageMeter()
    handle = meter.wrap(ModelHandle("void/m", VoidUsageProvider(), ModelConfig(model="void/m")))
    for _ in range(2):
        async for _event in handle.stream(ChatRequest("m", [])):
            pass
    assert meter.model_calls == 2 and meter.as_json()["totalTokens"] == 0
    said = [r.getMessage() for r in caplog.records]
    assert said == ["ignoring the usage model void/m reported: a malformed usage block: {} (no "
                    "usage_update, no cost, not in the turn's usage; said once per session)"]


async def test_the_cost_adds_up_across_the_turns_of_a_session_and_is_kept(paths):
    price = ModelPrice(input=2, cached_input=0.5, output=10, currency="EUR")
    async with FakeOpenAI() as server:
        server.script(
            text("one").costing(1000, 100, cached=400),  # 600×2 + 400×0.5 + 100×10 = 2400
            text("two").costing(2000, 50, cached=1000),  # 1000×2 + 1000×0.5 + 50×10 = 3000
        )
        cfg = sized(fake_config(server.base_url), price=price)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "first") == "end_turn"
            assert await prompt(ed, sid, "second") == "end_turn"
            sent = wire_usage_updates(ed)
            answers = prompt_answers(ed)
    costs = [u["cost"] for u in sent]
    assert [c["currency"] for c in costs] == ["EUR", "EUR"]
    assert [c["amount"] for c in costs] == [pytest.approx(0.0024), pytest.approx(0.0054)]
    # The prompt answer's usage is the turn's alone.
    assert [a["usage"] for a in answers] == [usage(1000, 100, 400), usage(2000, 50, 1000)]
    record = json.loads((paths.sessions_dir / sid / "session.json").read_text())
    assert record["cost"] == {"amount": pytest.approx(0.0054), "currency": "EUR"}


@pytest.mark.parametrize("absurd", [10**30, 10**12 + 1, -1, 12.5])
async def test_an_absurd_token_count_voids_that_answers_usage_and_is_logged_once_per_session(
    paths, caplog, absurd
):
    caplog.set_level(logging.WARNING, logger="acp_memory")
    price = ModelPrice(input=1, output=1)
    async with FakeOpenAI() as server:
        server.script(
            text("one").costing(1000, 100),
            text("two").costing(absurd, 5),
            text("three").costing(absurd, 5),
            text("four").costing(2000.0, 10),  # 2000.0 counts as 2000
        )
        cfg = sized(fake_config(server.base_url), price=price)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            for word in ("first", "second", "third", "fourth"):
                assert await prompt(ed, sid, word) == "end_turn"
            sent = wire_usage_updates(ed)
            answers = prompt_answers(ed)
    # No usage_update and no cost for the void answers; the others count as ever.
    assert [u["used"] for u in sent] == [1100, 2010]
    assert [u["cost"]["amount"] for u in sent] == [pytest.approx(0.0011), pytest.approx(0.00311)]
    assert [a["usage"] for a in answers] == [usage(1000, 100), usage(0, 0), usage(0, 0),
                                             usage(2000, 10)]
    said = [r.getMessage() for r in caplog.records if "ignoring the usage" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"session {sid}: ignoring the usage model ")


async def test_a_session_loaded_again_goes_on_from_its_kept_cost(paths):
    price = ModelPrice(input=1, output=1)
    async with FakeOpenAI(default=text("ok").costing(400_000, 100_000)) as server:
        cfg = sized(fake_config(server.base_url), price=price)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "first") == "end_turn"
        async with turn_agent(cfg, paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
            assert await prompt(ed, sid, "second") == "end_turn"
            (update,) = wire_usage_updates(ed)
    assert update["cost"] == {"amount": pytest.approx(1.0), "currency": "USD"}


async def test_a_price_in_another_currency_starts_the_sessions_cost_again(paths):
    async with FakeOpenAI(default=text("ok").costing(400_000, 100_000)) as server:
        cfg = sized(fake_config(server.base_url), price=ModelPrice(input=1, output=1))
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "first") == "end_turn"
        euros = ModelPrice(input=2, output=2, currency="EUR")
        cfg = sized(fake_config(server.base_url), price=euros)
        async with turn_agent(cfg, paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
            assert await prompt(ed, sid, "second") == "end_turn"
            (update,) = wire_usage_updates(ed)
    # US dollars and euros do not add up: the count starts again, in euros.
    assert update["cost"] == {"amount": pytest.approx(1.0), "currency": "EUR"}
    record = json.loads((paths.sessions_dir / sid / "session.json").read_text())
    assert record["cost"] == {"amount": pytest.approx(1.0), "currency": "EUR"}


class MemoryRoutedOpenAI(FakeOpenAI):
    """The memory child (offered memory_search) has its own script."""

    def __init__(self) -> None:
        super().__init__()
        self.child: list[Reply] = []

    def _next(self, request: Recorded) -> Reply:
        tools = [t["function"]["name"] for t in (request.json or {}).get("tools", [])]
        if "memory_search" in tools:
            return self.child.pop(0) if self.child else error(500, "no child reply left")
        return super()._next(request)


async def test_the_prompt_answer_counts_the_memory_run_apart_in_its_meta(paths):
    price = ModelPrice(input=1, output=1)
    async with MemoryRoutedOpenAI() as server:
        server.child = [
            tool_calls(call("memory_search", {"query": "fruit", "scope": "both"}))
            .costing(300, 20),
            text("(no memory hits)").costing(400, 30, cached=100),
        ]
        server.script(text("Mango.").costing(1000, 50, cached=200))
        cfg = sized(fake_config(server.base_url), price=price)
        cfg.memory = MemoryConfig(enable=True, wait_seconds=10)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "What is my favourite fruit?") == "end_turn"
            (answer,) = prompt_answers(ed)
            (update,) = wire_usage_updates(ed)
    # The turn's own call; the run's two calls beside it, a second conversation.
    assert answer["usage"] == usage(1000, 50, cached=200)
    run = answer["_meta"]["acpMemory"]["memoryRun"]
    assert run == {
        "taskId": "bg_1",
        "taskStatus": "succeeded",
        "usage": {"modelCalls": 2, "inputTokens": 700, "outputTokens": 50,
                  "cachedReadTokens": 100, "cachedWriteTokens": 0, "totalTokens": 750,
                  "durationMs": run["usage"]["durationMs"]},
    }
    # The session's cost is the main agent's calls only: 1050 tokens at 1 per million.
    assert update["cost"] == {"amount": pytest.approx(0.00105), "currency": "USD"}


async def test_a_memory_run_still_going_at_the_answer_is_named_without_numbers(paths):
    release = anyio.Event()
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)").stalled_after(0, release=release)]
        server.script(text("Hello.").costing(80, 8))
        cfg = sized(fake_config(server.base_url))
        cfg.memory = MemoryConfig(enable=True, wait_seconds=0)  # the turn does not wait
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
            (answer,) = prompt_answers(ed)
            release.set()  # the run ends before the agent stops
    assert answer["usage"] == usage(80, 8)
    # Its numbers come with its finished memory_run update, once it settles.
    assert answer["_meta"] == {"acpMemory": {"memoryRun": {"taskId": "bg_1",
                                                           "taskStatus": "running"}}}
