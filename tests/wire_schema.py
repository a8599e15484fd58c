"""Validates every message the agent sends against the official ACP v1 JSON schema."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "shared" / "acp-schema" / "schema.v1.json"
_LOCAL = Path(__file__).resolve().parent / "data" / "schema.v1.json"
_URI = "urn:acp:schema.v1"


@cache
def _schema() -> dict[str, Any]:
    for path in (SCHEMA_FILE, _LOCAL, Path("../shared/acp-schema/schema.v1.json")):
        if path.is_file():
            return json.loads(path.read_text())
    raise FileNotFoundError("shared/acp-schema/schema.v1.json not found beside the checkout")


@cache
def _registry() -> Registry:
    return Registry().with_resource(_URI, Resource.from_contents(_schema()))


@cache
def _by_method() -> dict[tuple[str, str], str]:
    """(method, 'params'|'result') -> $defs name, from the schema's x-method annotations."""
    found: dict[tuple[str, str], str] = {}
    for name, d in _schema()["$defs"].items():
        method = d.get("x-method")
        if not method:
            continue
        kind = "result" if name.endswith("Response") else "params"
        found[(method, kind)] = name
    return found


@cache
def _validator(def_name: str) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(_schema())
    return cls({"$ref": f"{_URI}#/$defs/{def_name}"}, registry=_registry())


def def_for(method: str, kind: str) -> str:
    return _by_method()[(method, kind)]


def validate_def(def_name: str, instance: Any) -> None:
    """Raise jsonschema.ValidationError when instance does not match $defs[def_name]."""
    _validator(def_name).validate(instance)


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
            validate_def(def_for(msg["method"], "params"), msg.get("params"))
        elif "error" in msg:
            validate_def("Error", msg["error"])
        else:
            method = self.client_requests.get(msg.get("id"))
            if method is None:
                raise jsonschema.ValidationError(f"response to unknown id {msg.get('id')!r}")
            if (method, "result") in _by_method():
                validate_def(def_for(method, "result"), msg["result"])

    def assert_clean(self) -> None:
        assert not self.errors, "agent messages that break schema.v1.json:\n" + "\n".join(
            self.errors
        )
