"""Validates every message the agent sends against the official ACP schemas: the current
stable one, or the unstable one for unstable fields."""

from __future__ import annotations

import contextlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "shared" / "acp-schema"
_LOCAL = Path(__file__).resolve().parent / "data"
# The protocol's current stable schema; a message using unstable fields is checked against the
# unstable one instead (the rule: stable, or unstable for unstable fields).
STABLE, UNSTABLE = "schema.json", "schema.unstable.json"


@cache
def _schema(name: str = STABLE) -> dict[str, Any]:
    for folder in (SCHEMA_DIR, _LOCAL, Path("../shared/acp-schema")):
        if (folder / name).is_file():
            return json.loads((folder / name).read_text())
    raise FileNotFoundError(f"shared/acp-schema/{name} not found beside the checkout")


def _uri(name: str) -> str:
    return f"urn:acp:{name}"


@cache
def _registry(name: str) -> Registry:
    return Registry().with_resource(_uri(name), Resource.from_contents(_schema(name)))


@cache
def _by_method() -> dict[tuple[str, str], str]:
    """(method, 'params'|'result') -> $defs name, from the schemas' x-method annotations."""
    found: dict[tuple[str, str], str] = {}
    for schema in (_schema(UNSTABLE), _schema(STABLE)):  # the stable name wins
        for name, d in schema["$defs"].items():
            method = d.get("x-method")
            if not method:
                continue
            kind = "result" if name.endswith("Response") else "params"
            found[(method, kind)] = name
    return found


@cache
def _validator(name: str, def_name: str) -> jsonschema.protocols.Validator | None:
    schema = _schema(name)
    if def_name not in schema["$defs"]:
        return None
    cls = jsonschema.validators.validator_for(schema)
    return cls({"$ref": f"{_uri(name)}#/$defs/{def_name}"}, registry=_registry(name))


def def_for(method: str, kind: str) -> str:
    return _by_method()[(method, kind)]


def validate_def(def_name: str, instance: Any) -> None:
    """Raise jsonschema.ValidationError when instance matches $defs[def_name] in neither the
    stable schema nor (for unstable fields) the unstable one; the stable schema's error."""
    stable = _validator(STABLE, def_name)
    first: jsonschema.ValidationError | None = None
    if stable is not None:
        try:
            stable.validate(instance)
            return
        except jsonschema.ValidationError as exc:
            first = exc
    unstable = _validator(UNSTABLE, def_name)
    if unstable is None:
        raise first or jsonschema.ValidationError(f"{def_name} is in no schema")
    try:
        unstable.validate(instance)
    except jsonschema.ValidationError as exc:
        raise first or exc from None


# The one update outside the schemas that acp-memory sends, exactly as documented in
# docs/architecture.md and DESIGN.md: a memory run started, finished (with its cost in
# `_meta.acpMemory`) or skipped, each saying its kind in `_meta.acpMemory.kind`. Anything else
# is refused.
_RUN_STATUS = {"enum": ["succeeded", "failed", "timed_out", "stopped"]}
_TASK_ID = {"type": "string", "pattern": "^bg_[0-9]+$"}
_SESSION_ID = {"type": "string", "pattern": "^sess_[0-9a-f]{24}$"}
_COUNT = {"type": "integer", "minimum": 0}
_COST_KEYS = ["modelCalls", "inputTokens", "outputTokens", "cachedReadTokens",
              "cachedWriteTokens", "durationMs"]
# What started a run: a user turn, a session let go or closed (a reflection), or /memory tidy.
_RUN_KIND = {"enum": ["turn", "reflect", "tidy"]}
# What a finished run cost, in the one `_meta` key the design gives it: nothing else rides there.
_COST_META = {
    "type": "object",
    "required": ["acpMemory"],
    "properties": {
        "acpMemory": {
            "type": "object",
            "required": [*_COST_KEYS, "kind"],
            "properties": {**dict.fromkeys(_COST_KEYS, _COUNT), "kind": _RUN_KIND},
            "additionalProperties": False,
        }
    },
    "additionalProperties": False,
}
# The started and skipped updates say what started the run, and nothing else rides there.
_KIND_META = {
    "type": "object",
    "required": ["acpMemory"],
    "properties": {
        "acpMemory": {
            "type": "object",
            "required": ["kind"],
            "properties": {"kind": _RUN_KIND},
            "additionalProperties": False,
        }
    },
    "additionalProperties": False,
}
MEMORY_RUN_VARIANTS: dict[str, dict[str, Any]] = {
    "started": {
        "required": ["status", "taskId", "childSessionId", "_meta"],
        "properties": {"taskId": _TASK_ID, "childSessionId": _SESSION_ID, "_meta": _KIND_META},
    },
    "finished": {
        "required": ["status", "taskId", "childSessionId", "taskStatus", "durationMs", "delivered",
                     "_meta"],
        "properties": {
            "taskId": _TASK_ID,
            "childSessionId": _SESSION_ID,
            "taskStatus": _RUN_STATUS,
            "durationMs": _COUNT,
            "delivered": {"type": "boolean"},
            "reason": {"type": "string", "minLength": 1},
            "_meta": _COST_META,
        },
    },
    "skipped": {
        "required": ["status", "reason", "_meta"],
        "properties": {"reason": {"type": "string", "minLength": 1}, "_meta": _KIND_META},
    },
}


def validate_memory_run(payload: Any, *, extension: bool) -> None:
    """A memory_run update (extension=False) or the `_acp_memory/memory_run` notification's
    params (extension=True: no sessionUpdate, a sessionId instead)."""
    if not isinstance(payload, dict):
        raise jsonschema.ValidationError("memory_run payload must be an object")
    variant = MEMORY_RUN_VARIANTS.get(payload.get("status"))  # type: ignore[arg-type]
    if variant is None:
        raise jsonschema.ValidationError(f"memory_run status {payload.get('status')!r}")
    # The session the editor knows: ours (`sess_…`, or one a user named) or, through the proxy,
    # the inner agent's, any string ACP allows; the child is always ours.
    tag = ({"sessionId": {"type": "string", "minLength": 1}} if extension
           else {"sessionUpdate": {"const": "memory_run"}})
    schema = {
        "type": "object",
        "required": [*variant["required"], *tag],
        "properties": {"status": {"const": payload["status"]}, **variant["properties"], **tag},
        "additionalProperties": False,
    }
    jsonschema.validate(payload, schema)


class WireChecker:
    """Follows one connection: remembers the methods of client requests, checks agent messages."""

    def __init__(self) -> None:
        self.client_requests: dict[Any, str] = {}
        self.sent: list[dict[str, Any]] = []
        self.errors: list[str] = []

    def saw_client_line(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            return
        for m in msg if isinstance(msg, list) else [msg]:
            if isinstance(m, dict) and "method" in m and "id" in m:
                with contextlib.suppress(TypeError):  # an unhashable id is no one's answer
                    self.client_requests[m["id"]] = m["method"]

    def saw_agent_line(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError as exc:
            self.errors.append(f"agent sent a line that is not JSON: {exc}: {line[:200]!r}")
            return
        self.sent.append(msg)
        for m in msg if isinstance(msg, list) else [msg]:  # a batch answer
            try:
                self._check(m)
            except jsonschema.ValidationError as exc:
                self.errors.append(f"{exc.message} in {json.dumps(m)[:400]}")

    def _check(self, msg: dict[str, Any]) -> None:
        if msg.get("jsonrpc") != "2.0":
            raise jsonschema.ValidationError("jsonrpc must be '2.0'")
        if "method" in msg:
            method, params = msg["method"], msg.get("params")
            if method == "_acp_memory/memory_run":
                validate_memory_run(params, extension=True)
            elif method == "session/update" and _is_memory_run(params):
                validate_def("SessionNotification", {**params, "update": _placeholder_update()})
                validate_memory_run(params["update"], extension=False)
            elif (method, "params") in _by_method():
                validate_def(def_for(method, "params"), params)
            else:
                raise jsonschema.ValidationError(f"method {method!r} is in no schema")
        elif "error" in msg:
            validate_def("Error", msg["error"])
        else:
            method = self.client_requests.get(msg.get("id"))
            if method is None:
                raise jsonschema.ValidationError(f"response to unknown id {msg.get('id')!r}")
            if (method, "result") in _by_method():
                validate_def(def_for(method, "result"), msg["result"])

    def assert_clean(self) -> None:
        assert not self.errors, "agent messages that break the ACP schema:\n" + "\n".join(
            self.errors
        )


def _is_memory_run(params: Any) -> bool:
    update = params.get("update") if isinstance(params, dict) else None
    return isinstance(update, dict) and update.get("sessionUpdate") == "memory_run"


def _placeholder_update() -> dict[str, Any]:
    # Checks the envelope (sessionId, _meta) against the schema; the update is checked above.
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ""}}
