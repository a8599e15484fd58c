"""What the proxy adds to what the inner agent offers the editor: the boolean `acp_memory`
config option (for a client that shows boolean options), set here, and `/memory`, `/remember`
and `/forget` in place of the agent's commands of those names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from acp_memory.acp.options import check_memory
from acp_memory.acp.schema import BooleanConfigOption
from acp_memory.acp.updates import commands_update
from acp_memory.commands.registry import COMMANDS
from acp_memory.jsonrpc.errors import INTERNAL_ERROR, INVALID_PARAMS, RpcError
from acp_memory.proxy.relay import Forward, Reply
from acp_memory.proxy.sessions import Proxied
from acp_memory.runtime.runner import SessionRunner
from acp_memory.sessions.lock import BundleBusy

OPTION_ID = "acp_memory"
# The commands the proxy answers itself, whatever the agent has of the same name.
PROXY_COMMANDS = ("memory", "remember", "forget")


class ProxyOptions:
    """Each inner session's config options as the editor sees them: the agent's last ones,
    with the `acp_memory` switch."""

    def __init__(self, runner: SessionRunner, sessions: Mapping[str, Proxied]) -> None:
        self.runner = runner
        self.sessions = sessions  # the policy's, by inner session id
        self.agent: dict[str, list[Any]] = {}  # the agent's last configOptions
        self.boolean_shown = False  # the client shows boolean config options

    async def set_option(self, params: dict[str, Any], forward: Forward) -> Reply:
        """`session/set_config_option`: `acp_memory` set here, any other forwarded."""
        inner_id = params.get("sessionId")
        if params.get("configId") != OPTION_ID:
            reply = await forward(params)
            if isinstance(inner_id, str) and isinstance(reply.result, dict):
                options = reply.result.get("configOptions")
                if isinstance(options, list):
                    return Reply(result=self.with_option(inner_id, reply.result))
            return reply
        proxied = self.sessions.get(inner_id) if isinstance(inner_id, str) else None
        if proxied is None:
            return Reply(error={"code": INVALID_PARAMS,
                                "message": f"Invalid params: sessionId: no session {inner_id!r}"})
        try:
            proxied.session.record.memory_enabled = check_memory(params.get("value"))
            await proxied.session.save_record()
        except RpcError as exc:
            return Reply(error={"code": exc.code, "message": exc.message})
        except (BundleBusy, OSError) as exc:
            return Reply(error={"code": INTERNAL_ERROR,
                                "message": f"cannot save the memory option: {exc}"})
        options = self.agent.get(proxied.inner_id, [])
        return Reply(result={"configOptions": self.merged(proxied.inner_id, options)})

    def with_option(self, inner_id: str, result: dict[str, Any]) -> dict[str, Any]:
        """A result or update with the agent's `configOptions`, kept, and ours merged in."""
        options = result.get("configOptions")
        if not isinstance(options, list):
            return result
        self.agent[inner_id] = options
        return {**result, "configOptions": self.merged(inner_id, options)}

    def update(self, inner_id: str) -> dict[str, Any] | None:
        """The session's `config_option_update` as it stands; None before the agent sent
        any options."""
        options = self.agent.get(inner_id)
        if options is None:
            return None
        return {"sessionUpdate": "config_option_update",
                "configOptions": self.merged(inner_id, options)}

    def merged(self, inner_id: str, options: list[Any]) -> list[Any]:
        """The agent's config options, with the `acp_memory` switch when the client shows
        boolean options."""
        if not self.boolean_shown:
            return options
        proxied = self.sessions.get(inner_id)
        on = (self.runner.memory_enabled(proxied.session) if proxied is not None
              else self.runner.cfg.memory.enable)
        switch = BooleanConfigOption(
            id=OPTION_ID,
            name="Long-term memory",
            description="acp-memory's memory run on every prompt: recalls from the notes, "
                        "saves to them",
            current_value=on,
        )
        kept = [o for o in options if not (isinstance(o, dict) and o.get("id") == OPTION_ID)]
        return [*kept, switch.dump()]


def with_our_commands(commands: list[Any]) -> list[Any]:
    """The agent's commands with the proxy's three in place of any of the same name."""
    ours = commands_update(c for c in COMMANDS if c.name in PROXY_COMMANDS)["availableCommands"]
    for command in ours:
        if command["name"] == "memory":
            command["input"] = {"hint": f"on, off, {command['input']['hint']}"}
    kept = [c for c in commands if not (isinstance(c, dict) and c.get("name") in PROXY_COMMANDS)]
    return [*kept, *ours]
