"""Provider faults surface through the agent with the provider's status and words, and the API
key never reaches a bundle, a transcript, an update, an error or a log line."""

from __future__ import annotations

import logging

import pytest
from acp import RequestError, text_block
from fakes.openai_server import FakeOpenAI
from fakes.script import call, error, split, text, tool_calls
from turnkit import API_KEY, bundle_files, fake_config, prompt, stored_messages, turn_agent

pytestmark = pytest.mark.anyio
INTERNAL_ERROR = -32603


async def test_a_402_before_output_ends_the_prompt_with_the_providers_status_and_message(paths):
    async with FakeOpenAI() as server:
        server.script(error(402, "subscription expired"), text("Back again."))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            with pytest.raises(RequestError) as err:
                await ed.conn.prompt(session_id=sid, prompt=[text_block("hello")])
            # Not retried, and the session stays usable.
            assert len(server.requests) == 1
            assert await prompt(ed, sid, "hello again") == "end_turn"
    assert err.value.code == INTERNAL_ERROR
    assert "402" in str(err.value) and "subscription expired" in str(err.value)
    assert err.value.data == {"status": 402, "provider": "fake", "afterOutput": False}
    assert [m["role"] for m in stored_messages(paths, sid)] == ["user", "user", "assistant"]


async def test_a_stream_broken_after_output_says_so_and_keeps_the_partial_reply(paths):
    async with FakeOpenAI() as server:
        server.script(text("Hello brave new world", chunks=4).broken_after(2))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            with pytest.raises(RequestError) as err:
                await ed.conn.prompt(session_id=sid, prompt=[text_block("hi")])
            streamed = ed.client.text(sid)
    assert len(server.requests) == 1  # never streamed twice
    assert err.value.data["afterOutput"] is True
    assert streamed == "".join(split("Hello brave new world", 4)[:2])
    assert stored_messages(paths, sid)[-1]["content"] == streamed


async def test_the_api_key_never_reaches_bundles_transcripts_updates_errors_or_logs(
    paths, caplog
):
    (paths.cwd / "k.txt").write_text("nothing secret\n")
    caplog.set_level(logging.DEBUG)
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("read_file", {"path": "k.txt"})),
            text("Read it."),
            # A provider that echoes the key back in its error message.
            error(401, f"Incorrect API key provided: {API_KEY}"),
        )
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "read k.txt") == "end_turn"
            with pytest.raises(RequestError) as err:
                await ed.conn.prompt(session_id=sid, prompt=[text_block("again")])
            updates = repr(ed.client.updates)
    # The key did go where it belongs: the Authorization header of every request.
    assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {API_KEY}"}
    assert all(API_KEY not in r.body.decode() for r in server.requests)
    assert err.value.data["status"] == 401
    assert API_KEY not in str(err.value) and "[redacted]" in str(err.value)
    files = bundle_files(paths)
    assert any(f.name == "messages.json" for f in files)
    for f in files:
        assert API_KEY not in f.read_text(errors="replace"), f
    assert API_KEY not in updates
    assert API_KEY not in caplog.text
