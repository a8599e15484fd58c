"""`$/cancel_request` through the official SDK client: a named prompt ends `cancelled`, any
other named request answers -32800, and the cancel itself gets no answer."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from gated import GatedProvider, gated_agent, prompt_in_flight
from harness import Editor, in_process_agent

from acp_memory.config import Config
from acp_memory.config.models import HooksConfig

pytestmark = pytest.mark.anyio


def _request_id(ed: Editor, method: str) -> Any:
    """The id the SDK client gave its last request of `method` (as the agent read it)."""
    return [i for i, m in ed.checker.client_requests.items() if m == method][-1]


async def _cancel_request(ed: Editor, request_id: Any) -> None:
    # The SDK has no call for it: the notification, as the schema spells it.
    await ed.conn._conn.send_notification("$/cancel_request", {"requestId": request_id})


def _answers_to(ed: Editor, request_id: Any) -> list[dict[str, Any]]:
    return [m for m in ed.checker.sent if "method" not in m and m.get("id") == request_id]


def _holding_session_start(cfg: Config, tmp_path: Path, source: str | None = None) -> Path:
    """SessionStart hooks (of `source` alone, when given) that say they started through the
    fifo returned, then hold their request until they are killed."""
    fifo = tmp_path / "hook-started"
    os.mkfifo(fifo)
    hold = f"echo started > {shlex.quote(str(fifo))}; sleep 600"
    if source is not None:
        hold = f"grep -q {source} && {{ {hold}; }}"
    cfg.hooks = HooksConfig.model_validate(
        {"SessionStart": [{"hooks": [{"type": "command", "command": hold, "timeout": 600}]}]}
    )
    return fifo


async def _cancelled_in_its_hook(
    ed: Editor, fifo: Path, method: str, send: Callable[[], Awaitable[Any]]
) -> RequestError:
    """The error of `send` (a request of `method`), cancelled by `$/cancel_request` once its
    SessionStart hook runs."""
    failure: dict[str, RequestError] = {}

    async def request() -> None:
        with pytest.raises(RequestError) as err:
            await send()
        failure[method] = err.value

    async with anyio.create_task_group() as tg:
        tg.start_soon(request)
        with anyio.fail_after(20):
            await anyio.to_thread.run_sync(Path(fifo).read_text)  # the hook runs
            await _cancel_request(ed, _request_id(ed, method))
    return failure[method]


async def test_cancel_request_naming_a_running_prompt_ends_it_cancelled(cfg, paths):
    provider = GatedProvider()
    async with in_process_agent(cfg, paths, gated_agent(cfg, paths, provider)) as ed:
        sid = await ed.start_session(paths.cwd)
        async with prompt_in_flight(ed, sid, provider) as result:
            prompt_id = _request_id(ed, "session/prompt")
            await _cancel_request(ed, prompt_id)
        assert result["resp"].stop_reason == "cancelled"
        assert provider.cancelled.is_set()  # the model call was stopped, not waited for
        assert len(_answers_to(ed, prompt_id)) == 1  # the prompt's answer; the cancel has none
    stored = json.loads((paths.sessions_dir / sid / "messages.json").read_text())["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]


async def test_cancel_request_naming_another_running_request_answers_32800(cfg, paths, tmp_path):
    # session/load of a session new to this process runs its SessionStart hooks: this one
    # says so through a fifo, then holds the load until it is killed.
    fifo = _holding_session_start(cfg, tmp_path, "resume")
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)  # its "startup" SessionStart lets it go
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        load = partial(ed.conn.load_session, cwd=str(paths.cwd), session_id=sid, mcp_servers=[])
        failure = await _cancelled_in_its_hook(ed, fifo, "session/load", load)
        assert failure.code == -32800
        # Nothing was left behind: the session answers, and loads again, in this connection.
        resp = await ed.conn.set_session_mode(session_id=sid, mode_id="ask")
        assert resp is not None


async def test_a_session_new_cancelled_in_its_hooks_leaves_its_bundle_free_to_load(
    cfg, paths, tmp_path
):
    fifo = _holding_session_start(cfg, tmp_path)
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        new = partial(ed.conn.new_session, cwd=str(paths.cwd), mcp_servers=[])
        failure = await _cancelled_in_its_hook(ed, fifo, "session/new", new)
        assert failure.code == -32800
        (bundle,) = paths.sessions_dir.iterdir()
        # Its bundle is not held by a session no one was given: it loads (its hook has run)
        # and takes a write.
        await ed.conn.load_session(cwd=str(paths.cwd), session_id=bundle.name, mcp_servers=[])
        await ed.conn.set_session_mode(session_id=bundle.name, mode_id="ask")
    assert json.loads((bundle / "session.json").read_text())["mode"] == "ask"
