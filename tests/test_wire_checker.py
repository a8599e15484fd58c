"""The tests' wire checker: the official schema, plus exactly the documented memory_run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from wire_schema import WireChecker

SID = "sess_" + "a" * 24
CHILD = "sess_" + "b" * 24
STARTED = {
    "sessionUpdate": "memory_run",
    "status": "started",
    "taskId": "bg_3",
    "childSessionId": CHILD,
    "_meta": {"acpMemory": {"kind": "turn"}},
}
FINISHED = {
    "sessionUpdate": "memory_run",
    "status": "finished",
    "taskId": "bg_3",
    "childSessionId": CHILD,
    "taskStatus": "succeeded",
    "durationMs": 3210,
    "delivered": True,
    "_meta": {"acpMemory": {"modelCalls": 2, "inputTokens": 1200, "outputTokens": 95,
                            "cachedReadTokens": 800, "cachedWriteTokens": 0, "durationMs": 3210,
                            "kind": "turn"}},
}
COST = FINISHED["_meta"]["acpMemory"]
FAILED = {
    **FINISHED,
    "taskStatus": "failed",
    "delivered": False,
    "reason": "402 Payment Required: subscription expired",
}
SKIPPED = {
    "sessionUpdate": "memory_run",
    "status": "skipped",
    "reason": "memory runs in flight for this session: 2 of 2",
    "_meta": {"acpMemory": {"kind": "turn"}},
}
REFLECT = {"acpMemory": {"kind": "reflect"}}


def _errors(*messages: dict[str, Any]) -> list[str]:
    checker = WireChecker()
    for m in messages:
        checker.saw_agent_line(json.dumps({"jsonrpc": "2.0", **m}).encode())
    return checker.errors


def _update(update: dict[str, Any]) -> dict[str, Any]:
    return {"method": "session/update", "params": {"sessionId": SID, "update": update}}


def _extension(update: dict[str, Any]) -> dict[str, Any]:
    params = {k: v for k, v in update.items() if k != "sessionUpdate"}
    return {"method": "_acp_memory/memory_run", "params": {"sessionId": SID, **params}}


@pytest.mark.parametrize("update", [
    STARTED, FINISHED, FAILED, SKIPPED,
    {**STARTED, "_meta": REFLECT}, {**SKIPPED, "_meta": REFLECT},
    {**FINISHED, "_meta": {"acpMemory": {**COST, "kind": "reflect"}}},
])
def test_the_documented_memory_run_updates_pass_in_both_forms(update):
    assert _errors(_update(update), _extension(update)) == []


@pytest.mark.parametrize(
    "update",
    [
        {**STARTED, "text": "a report"},  # no text ever travels on it
        {**FINISHED, "taskStatus": "orphaned"},
        {**FINISHED, "durationMs": -1},
        {k: v for k, v in FINISHED.items() if k != "delivered"},
        {**STARTED, "status": "running"},
        {**SKIPPED, "reason": ""},
        {**STARTED, "taskId": "task-3"},
    ],
)
def test_anything_else_named_memory_run_is_refused(update):
    assert len(_errors(_update(update))) == 1
    assert len(_errors(_extension(update))) == 1


@pytest.mark.parametrize(
    "update",
    [
        {**FINISHED, "_meta": {"acpMemory": {**COST, "costUsd": 1}}},  # a key of our own making
        {**FINISHED, "_meta": {"acpMemory": COST, "other": {}}},  # another _meta key
        {**FINISHED, "_meta": {"acpMemory": {**COST, "inputTokens": -1}}},
        {**FINISHED, "_meta": {"acpMemory": {k: v for k, v in COST.items() if k != "modelCalls"}}},
        {k: v for k, v in FINISHED.items() if k != "_meta"},  # a finished run says its cost
        {**STARTED, "_meta": FINISHED["_meta"]},  # only the finished update carries it
    ],
)
def test_the_finished_cost_is_exactly_the_documented_meta(update):
    assert len(_errors(_update(update))) == 1
    assert len(_errors(_extension(update))) == 1


@pytest.mark.parametrize(
    "update",
    [
        {k: v for k, v in STARTED.items() if k != "_meta"},
        {k: v for k, v in SKIPPED.items() if k != "_meta"},
        {**FINISHED, "_meta": {"acpMemory": {k: v for k, v in COST.items() if k != "kind"}}},
        {**STARTED, "_meta": {"acpMemory": {"kind": "nightly"}}},
        {**SKIPPED, "_meta": {"acpMemory": {"kind": "turn", "modelCalls": 0}}},
        {**STARTED, "_meta": {"acpMemory": {"kind": "turn"}, "other": {}}},
    ],
)
def test_every_memory_run_update_says_exactly_its_kind(update):
    assert len(_errors(_update(update))) == 1
    assert len(_errors(_extension(update))) == 1


def test_other_unknown_updates_and_methods_are_still_refused():
    assert len(_errors(_update({"sessionUpdate": "memory_log", "status": "started"}))) == 1
    assert len(_errors({"method": "_acp_memory/other", "params": {}})) == 1
