"""Editing one section of config.yaml in place: only the values that change are rewritten, so
comments, key order, quoting and `${VAR}` references everywhere else stay byte for byte.

ruamel.yaml's round-trip composer says where each node sits in the text; the new values are
rendered here and spliced in, and the result is read back as the loader reads it, to prove it
says what was asked before anybody writes it. Dumping the whole document again instead would
re-indent and re-space a file its owner laid out by hand.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RuamelYAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from acp_memory.config.loader import ConfigError, parse_raw

INDENT = 2  # the step of a section this module adds to a file
# Strings written bare: words, model ids and paths that YAML reads back as the same string.
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./@+-]*")

Splice = tuple[int, int, str]  # replace text[start:end] with the string


class ConfigEditError(Exception):
    """The text cannot be edited as asked; the message says why."""


def set_keys(text: str, section: str, values: Mapping[str, Any]) -> str:
    """`text` with the keys of its top-level `section` set to `values`, a missing section or
    key added; keys whose value is already the one asked are left exactly as written."""
    current = _load(text)
    old = current.get(section)
    changes = {
        key: value
        for key, value in values.items()
        if not (isinstance(old, dict) and key in old and same_value(old[key], value))
    }
    if not changes:
        return text
    new = _apply(text, _plan(text, section, changes))
    # A layout this module does not foresee (anchors, merge keys, ...) is refused, not written.
    try:
        read_back = _load(new).get(section)
    except ConfigEditError:
        read_back = None
    for key, value in values.items():
        if not isinstance(read_back, dict) or not same_value(read_back.get(key), value):
            raise ConfigEditError(
                f"{section}.{key}: the edited file would not read back as written; "
                "edit this key by hand"
            )
    return new


def same_value(a: Any, b: Any) -> bool:
    """Equal as config values: 20 is 20.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _load(text: str) -> dict[str, Any]:
    """The document as the config loader reads it."""
    try:
        return parse_raw(text)
    except ConfigError as exc:
        raise ConfigEditError(str(exc)) from None


def _plan(text: str, section: str, changes: Mapping[str, Any]) -> list[Splice]:
    try:
        root = YAML().compose(text)
    except RuamelYAMLError as exc:
        raise ConfigEditError(f"not valid YAML: {exc}") from None
    pair = _find(root, section) if isinstance(root, MappingNode) else None
    if pair is None:
        # No such section yet: it goes at the end, as a block of its own.
        lead = "" if not text or text.endswith("\n") else "\n"
        return [(len(text), len(text), f"{lead}{section}:{_block(changes, INDENT)}\n")]
    key, node = pair
    if isinstance(node, ScalarNode) and str(node.tag).endswith(":null"):
        # `memory:` with nothing after it, or `memory: null`: the keys go under it.
        at = _line_end(text, key.end_mark.index)
        column = key.start_mark.column + INDENT
        splices = [(at, at, _block(changes, column))]
        if node.end_mark.index > node.start_mark.index:
            splices.append((node.start_mark.index, node.end_mark.index, ""))
        return splices
    if not isinstance(node, MappingNode):
        raise ConfigEditError(f"{section} is not a mapping of keys; edit the file by hand")
    return _plan_mapping(text, node, changes)


def _plan_mapping(text: str, node: MappingNode, changes: Mapping[str, Any]) -> list[Splice]:
    flow = bool(node.flow_style)
    splices: list[Splice] = []
    added: dict[str, Any] = {}
    for name, value in changes.items():
        pair = _find(node, name)
        if pair is None:
            added[name] = value
            continue
        key, old = pair
        start, end = _span(text, old)
        new = _render(value, flow=flow, column=key.start_mark.column + INDENT, old=old)
        if new.startswith("|"):
            # A comment after the old value would become text of the block: it moves onto
            # the block's header line instead.
            line_end = _line_end(text, end)
            comment = text[end:line_end]
            if comment.strip():
                new = new.replace("\n", comment + "\n", 1)
                end = line_end
        splices.append((start, end, new))
    if added:
        if flow:
            close = node.end_mark.index - 1
            lead = ", " if node.value else ""
            items = ", ".join(f"{k}: {_render(v, flow=True, column=0)}" for k, v in added.items())
            splices.append((close, close, lead + items))
        else:
            column = node.value[0][0].start_mark.column
            at = _line_end(text, _span(text, node.value[-1][1])[1])
            splices.append((at, at, _block(added, column)))
    return splices


def _find(mapping: MappingNode, name: str) -> tuple[Node, Node] | None:
    """The last pair of that key, the one the loader keeps."""
    found = None
    for key, value in mapping.value:
        if isinstance(key, ScalarNode) and key.value == name:
            found = (key, value)
    return found


def _span(text: str, node: Node) -> tuple[int, int]:
    """Where a value's own text is: without the line breaks (and, for a block collection,
    the next key's indentation) that its end mark takes in."""
    start, end = node.start_mark.index, node.end_mark.index
    trailing = "\n" if isinstance(node, ScalarNode) else " \n"
    while end > start and text[end - 1] in trailing:
        end -= 1
    return start, end


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end


def _block(values: Mapping[str, Any], column: int) -> str:
    """Keys as lines of a block mapping at `column`, each line starting with its break."""
    pad = " " * column
    return "".join(
        f"\n{pad}{key}: {_render(value, flow=False, column=column + INDENT)}"
        for key, value in values.items()
    )


def _render(value: Any, *, flow: bool, column: int, old: Node | None = None) -> str:
    """A value as YAML text in its place: a multi-line string as a literal block indented to
    `column`, a list in the style of the one it replaces."""
    if isinstance(value, list):
        items = [_scalar(item) for item in value]
        if items and isinstance(old, SequenceNode) and not old.flow_style:
            return f"\n{' ' * old.start_mark.column}".join(f"- {item}" for item in items)
        return "[" + ", ".join(items) + "]"
    if isinstance(value, str) and "\n" in value and not flow:
        literal = _literal(value, column)
        if literal is not None:
            return literal
    return _scalar(value)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        plain = _PLAIN.fullmatch(value) and yaml.safe_load(value) == value
        return value if plain else _quoted(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigEditError(f"{value} is not a number a config file can hold")
    # JSON is YAML: numbers, true/false, null, and anything nested in flow style.
    return json.dumps(value, ensure_ascii=False)


def _quoted(value: str) -> str:
    """A double-quoted scalar: JSON's escapes, plus YAML's for what a reader would not take
    raw (NEL, line and paragraph separators, other non-printable characters)."""
    return "".join(
        c if c.isprintable() else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"
        for c in json.dumps(value, ensure_ascii=False)
    )


def _literal(value: str, column: int) -> str | None:
    """A `|` block scalar, or None when one cannot say it exactly (control characters, or
    several trailing line breaks)."""
    body = value.rstrip("\n")
    trailing = len(value) - len(body)
    if trailing > 1 or not body.strip() or any(
        not (c.isprintable() or c in "\n\t") for c in value
    ):
        return None
    chomp = "" if trailing else "-"
    # A first line that starts with a space would set the indentation: say it (relative to
    # the key, which sits INDENT to the left of `column`).
    indicator = str(INDENT) if body.lstrip("\n")[:1] == " " else ""
    pad = " " * column
    lines = "".join(f"\n{pad}{line}" if line else "\n" for line in body.split("\n"))
    return f"|{indicator}{chomp}{lines}"


def _apply(text: str, splices: list[Splice]) -> str:
    for start, end, new in sorted(splices, key=lambda s: s[0], reverse=True):
        text = text[:start] + new + text[end:]
    return text
