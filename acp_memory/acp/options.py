"""A session's modes and config options: what the client is shown, and what a change may set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp_memory.acp.schema import (
    BooleanConfigOption,
    SelectConfigOption,
    SelectOption,
    SessionMode,
    SessionModeState,
)
from acp_memory.jsonrpc.errors import INVALID_PARAMS, RpcError
from acp_memory.modes import MODE_LABELS, MODES, unknown_mode
from acp_memory.sessions.model import SessionRecord


def session_state(
    record: SessionRecord, model_ids: Sequence[str], memory: bool | None = None
) -> dict[str, Any]:
    """The `modes` and `configOptions` of a session/new or session/load answer."""
    modes = SessionModeState(
        current_mode_id=record.mode,
        available_modes=[
            SessionMode(id=mode_id, name=name, description=desc)
            for mode_id, (name, desc) in MODE_LABELS.items()
        ],
    )
    return {"modes": modes.dump(), "configOptions": config_options(record, model_ids, memory)}


MEMORY_OPTION = "memory"


def config_options(
    record: SessionRecord, model_ids: Sequence[str], memory: bool | None = None
) -> list[dict[str, Any]]:
    """The mode and model selectors and the memory switch (`memory`: its value; None in a
    child session, which has none), each with its current value."""
    options: list[SelectConfigOption | BooleanConfigOption] = [
        SelectConfigOption(
            id="mode",
            name="Mode",
            category="mode",
            current_value=record.mode,
            options=[
                SelectOption(value=m, name=name, description=desc)
                for m, (name, desc) in MODE_LABELS.items()
            ],
        ),
        SelectConfigOption(
            id="model",
            name="Model",
            category="model",
            current_value=record.selected_model_id,
            options=[SelectOption(value=m, name=m) for m in model_ids],
        ),
    ]
    if memory is not None:
        options.append(
            BooleanConfigOption(
                id=MEMORY_OPTION,
                name="Long-term memory",
                description="A memory run at every turn: recalls from the notes, saves to them",
                current_value=memory,
            )
        )
    return [o.dump() for o in options]


def mode_updates(
    record: SessionRecord, model_ids: Sequence[str], memory: bool | None = None
) -> list[dict[str, Any]]:
    """The session/update payloads of a mode switch: clients that show the config options
    rather than the modes see the switch too."""
    return [
        {"sessionUpdate": "current_mode_update", "currentModeId": record.mode},
        {
            "sessionUpdate": "config_option_update",
            "configOptions": config_options(record, model_ids, memory),
        },
    ]


def check_mode(mode_id: str) -> str:
    """`mode_id` when it names a mode, else the client's invalid-params error."""
    if mode_id not in MODES:
        raise RpcError(INVALID_PARAMS, f"Invalid params: modeId: {unknown_mode(mode_id)}")
    return mode_id


def check_memory(value: object) -> bool:
    """The memory option's new value, else the client's invalid-params error."""
    if not isinstance(value, bool):
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: value: the memory option is true or false, not {value!r}",
        )
    return value


def check_model(model_id: str, model_ids: Sequence[str]) -> str:
    """`model_id` when the config lists it, else the client's invalid-params error."""
    if model_id not in model_ids:
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: value: unknown model {model_id!r}; "
            f"choose one of {', '.join(model_ids)}",
        )
    return model_id
