"""`acp-memory proxy`: the editor on our stdio, the inner agent as our child, the relay between.

Exit codes: 0 once the editor's input ends (or on SIGTERM; 130 on Ctrl-C), 1 when the inner
agent died first, 2 when it cannot be started.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from acp_memory.acp.stdio import claim_stdio
from acp_memory.config import Config, Paths
from acp_memory.jsonrpc.fdstream import FdReceiveStream, FdSendStream
from acp_memory.llm.registry import ProviderHub
from acp_memory.proxy.inner import CannotStart, inner_agent
from acp_memory.proxy.policy import memory_policy
from acp_memory.proxy.relay import Relay, Side
from acp_memory.signals import cancel_when_set, exit_code, until_signalled

log = logging.getLogger(__name__)

AGENT_DIED = 1
CANNOT_START = 2


def serve_proxy(cfg: Config, paths: Paths, argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Relay the editor on stdio and the inner agent `argv` (our environment plus `env`)
    until either ends; returns the exit code."""
    wire_in, wire_out = claim_stdio()

    async def main() -> int:
        receive, send = FdReceiveStream(wire_in), FdSendStream(wire_out)
        try:
            return await proxy(cfg, paths, argv, env, (receive, send))
        finally:
            await receive.aclose()
            await send.aclose()

    return anyio.run(main)


async def proxy(
    cfg: Config,
    paths: Paths,
    argv: Sequence[str],
    env: Mapping[str, str],
    editor: tuple[ByteReceiveStream, ByteSendStream],
) -> int:
    """The proxy over the editor's streams: the inner agent started, relayed until either
    ends or a stop signal; the exit code."""
    try:
        async with (
            inner_agent(argv, env) as inner,
            ProviderHub(cfg) as hub,
            # Ends before the inner agent is stopped: the memory runs get their bounded wait.
            memory_policy(cfg, paths, hub, argv) as policy,
        ):
            relay = Relay(editor, (inner.stdout, inner.stdin), policy, agent_exit=inner.exit_line)
            policy.attach(relay)
            got = await until_signalled(lambda stop: _relay_until(relay, stop))
    except CannotStart as exc:
        print(exc, file=sys.stderr, flush=True)
        return CANNOT_START
    if relay.ended_by is Side.AGENT:
        return AGENT_DIED
    return exit_code(got)


async def _relay_until(relay: Relay, stop: anyio.Event) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_when_set, stop, tg.cancel_scope)
        await relay.run()
        tg.cancel_scope.cancel()
