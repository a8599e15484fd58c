"""A real turn through the ACP agent on a real tiny model (llama.cpp + SmolLM2-135M).

Opt-in: `pytest -m smoke` with the `smoke` extra installed. Structure only: the model is too
small for its words to mean anything, so the checks are on the shape of what happened.
"""

from __future__ import annotations

import pytest
from fakes.llamacpp import llamacpp_server, llamacpp_unavailable
from harness import in_process_agent
from turnkit import stored_messages

from acp_memory.config.models import AgentConfig, Config, ModelConfig, ProviderConfig

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.smoke,
    pytest.mark.skipif(llamacpp_unavailable() is not None, reason=llamacpp_unavailable() or ""),
]
# What a turn streams: its text, thoughts and tool calls, the session's title and time after
# it, and a usage_update where the model's context window is known.
STREAMED = {"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update",
            "session_info_update", "usage_update"}


async def test_a_real_model_runs_a_turn_within_its_step_bound(paths) -> None:
    (paths.cwd / "hello.txt").write_text("Hello from the smoke test.\n")
    async with llamacpp_server() as base_url:
        cfg = Config(
            providers=[ProviderConfig(name="llamacpp", type="openai", api_base=base_url)],
            models=[ModelConfig(model="llamacpp/smollm2", max_tokens=48, temperature=0)],
            # One model step with tools offered: whatever the model does, no second request.
            agent=AgentConfig(
                model="llamacpp/smollm2",
                max_turns=1,
                llm_retry_max=0,
                llm_first_token_timeout_ms=60_000,
                llm_stream_idle_timeout_ms=30_000,
            ),
        )
        async with in_process_agent(cfg, paths) as ed:
            sid = await ed.start_session(paths.cwd)
            resp = await ed.conn.prompt(
                session_id=sid,
                prompt=[{"type": "text", "text": "Say hello in one short sentence."}],
            )
            kinds = ed.client.kinds(sid)

    # Every update was schema-checked by the harness; here, only turn updates were streamed.
    assert set(kinds) <= STREAMED, kinds
    stored = stored_messages(paths, sid)
    assert (stored[0]["role"], stored[0]["content"]) == ("user", "Say hello in one short sentence.")
    assistants = [m for m in stored if m["role"] == "assistant"]
    assert len(assistants) == 1, "max_turns=1 allows exactly one model step"
    reply = assistants[0]
    if resp.stop_reason == "max_turn_requests":
        # The model called a tool: the step bound stopped the turn after running it.
        assert reply.get("toolCalls") and stored[-1]["role"] == "tool"
        assert "tool_call" in kinds
    else:
        assert resp.stop_reason in ("end_turn", "max_tokens")
        assert reply["content"].strip()
        # What was streamed is what was recorded.
        assert ed.client.text(sid) == reply["content"]
