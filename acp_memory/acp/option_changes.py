"""A client's change of a session's mode, model or memory switch: session.json saved, the
change told back (session/set_mode, session/set_config_option)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from acp_memory.acp.errors import writes
from acp_memory.acp.options import (
    MEMORY_OPTION,
    check_memory,
    check_mode,
    check_model,
    config_options,
    mode_updates,
)
from acp_memory.jsonrpc.errors import INVALID_PARAMS, RpcError
from acp_memory.sessions.store import Session

# The memory switch's value for a session; None in a child session, which has none.
MemoryOf = Callable[[Session], bool | None]
# One session/update payload sent for the session.
SendUpdate = Callable[[dict[str, Any]], Awaitable[None]]


async def switch_mode(
    session: Session,
    mode_id: str,
    model_ids: Sequence[str],
    memory_of: MemoryOf,
    send: SendUpdate,
) -> None:
    """The session's mode set (session.json saved when it changed), the switch told."""
    if session.record.mode != check_mode(mode_id):
        session.record.mode = mode_id
        with writes(session):
            await session.save_record()  # only session.json changed
    memory = memory_of(session)
    for update in mode_updates(session.record, model_ids, memory):
        await send(update)


async def set_option(
    session: Session,
    config_id: str,
    value: Any,
    model_ids: Sequence[str],
    memory_of: MemoryOf,
    send: SendUpdate,
) -> list[dict[str, Any]]:
    """One config option set (mode, model or the boolean memory); the options after it."""
    if config_id == "mode":
        await switch_mode(session, str(value), model_ids, memory_of, send)
    elif config_id == "model":
        session.record.selected_model_id = check_model(str(value), model_ids)
        with writes(session):
            await session.save_record()  # only session.json changed
    elif config_id == MEMORY_OPTION:
        # From this session's next turn on, its memory runs start or stop.
        session.record.memory_enabled = check_memory(value)
        with writes(session):
            await session.save_record()
    else:
        raise RpcError(INVALID_PARAMS, f"Invalid params: configId: unknown option {config_id!r}")
    return config_options(session.record, model_ids, memory_of(session))
