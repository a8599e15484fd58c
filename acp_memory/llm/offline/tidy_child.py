"""The offline model as a tidy run's child, deterministic, step by step: read every note the
task's candidate groups name, then one `propose_change` per group that needs one, then a
report of what it proposed.

- duplicates (shingle overlap ≥ 0.8): a merge into the newer note (the group's first path) that
  keeps every line only the other held;
- a contradiction: two notes giving one subject two values (`text/subjects.py`'s shapes): the
  older value's line leaves its note (the newer note is first in the group);
- a stale citation: the lines citing a path memory_read says is gone are dropped.

A note left empty by a drop is proposed for deletion instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from functools import partial

from acp_memory.llm.offline.child_steps import Exchange, exchanges, note_text
from acp_memory.llm.offline.wording import announce, numbered_calls
from acp_memory.llm.types import Message, ToolCall
from acp_memory.text.shingles import is_duplicate, text_overlap
from acp_memory.text.subjects import statements
from acp_memory.text.tidy_task import TaskGroup, paths_of, task_groups

TIDY_CHILD_TOOL = "propose_change"  # offered to a tidy run's child, and to no one else
NOTHING = "Nothing to tidy: no group needed a change."
_CITE = re.compile(r"^cites (?P<path>.+): not in the workspace$")
Call = tuple[str, dict[str, object]]


def tidy_step(conversation: list[Message]) -> tuple[str, list[ToolCall]]:
    """The tidy child's next move: the text it says and its tool calls (none with its
    report)."""
    users = [i for i, m in enumerate(conversation) if m.role == "user"]
    if not users:
        return NOTHING, []
    start = users[-1]
    groups = task_groups(conversation[start].content)
    done = exchanges(conversation[start + 1:])
    read = {e.arg("path") for e in done if e.name == "memory_read"}
    if unread := [p for p in paths_of(groups) if p not in read]:
        calls: list[Call] = [("memory_read", {"path": p}) for p in unread]
    elif not any(e.name == TIDY_CHILD_TOOL for e in done):
        calls = proposals(groups, _notes(done))
    else:
        calls = []
    if not calls:
        made = [e.result for e in done if e.name == TIDY_CHILD_TOOL]
        return ("\n".join(made) if made else NOTHING), []
    written = [(name, json.dumps(args, ensure_ascii=False)) for name, args in calls]
    out = numbered_calls(len(conversation), written)
    return announce(out), out


def _notes(done: Sequence[Exchange]) -> dict[str, tuple[str, list[str]]]:
    """Each note read: its text and the paths it cites that are gone."""
    out: dict[str, tuple[str, list[str]]] = {}
    for e in done:
        if e.name == "memory_read" and not e.failed:
            text, flags = note_text(e.result)
            out[e.arg("path")] = (text, [m["path"] for f in flags if (m := _CITE.match(f))])
    return out


def proposals(groups: Sequence[TaskGroup], notes: dict[str, tuple[str, list[str]]]
              ) -> list[Call]:
    """One propose_change per group that needs one; a note is touched by one group at most
    (a second proposal over it would be refused as changed since)."""
    calls: list[Call] = []
    touched: set[str] = set()
    for group in groups:
        paths = [p for p in group.paths if p in notes and p not in touched]
        call = _proposal(group, paths, notes)
        if call is not None:
            calls.append(call)
            touched.update(_paths(call))
    return calls


def _proposal(group: TaskGroup, paths: list[str], notes: dict[str, tuple[str, list[str]]]
              ) -> Call | None:
    kind = group.kind
    if kind.startswith("duplicate") and len(paths) >= 2:
        newer = notes[paths[0]][0]
        merged = [p for p in paths[1:] if is_duplicate(text_overlap(newer, notes[p][0]))]
        if not merged:
            return None
        body = newer.rstrip("\n")
        have = {line.strip() for line in newer.splitlines()}
        for p in merged:
            for line in notes[p][0].splitlines():
                if line.strip() and line.strip() not in have:
                    body += "\n" + line
                    have.add(line.strip())
        return _call("merge", [paths[0], *merged], body + "\n",
                     f"duplicates: {', '.join(merged)} said what {paths[0]} says")
    if kind.startswith("contradict") and len(paths) >= 2:
        newest = {st.subject: st.value for st in statements(notes[paths[0]][0])}
        for older in paths[1:]:
            call = _dropping(older, notes[older][0], partial(_contradicts, newest),
                             f"contradicted by the newer {paths[0]}")
            if call is not None:
                return call
        return None
    if kind.startswith("stale") and paths:
        for path in paths:
            text, gone = notes[path]
            if gone and (call := _dropping(path, text, partial(_cites_any, gone),
                                           f"cites {', '.join(gone)}, gone from the workspace")):
                return call
    return None


def _contradicts(newest: dict[str, str], line: str) -> bool:
    return any(st.subject in newest and newest[st.subject] != st.value
               for st in statements(line))


def _cites_any(gone: Sequence[str], line: str) -> bool:
    return any(g in line for g in gone)


def _dropping(path: str, text: str, drop: Callable[[str], bool], reason: str) -> Call | None:
    """The proposal that drops the lines `drop` picks from a note (its delete when nothing
    else is left); None when it picks none."""
    lines = text.splitlines()
    kept = [line for line in lines if not drop(line)]
    if len(kept) == len(lines):
        return None
    if not any(line.strip() and not line.lstrip().startswith("#") for line in kept):
        return _call("delete", [path], "", reason)
    return _call("update", [path], "\n".join(kept).rstrip("\n") + "\n", reason)


def _paths(call: Call) -> list[str]:
    paths = call[1]["paths"]
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


def _call(kind: str, paths: list[str], body: str, reason: str) -> Call:
    args: dict[str, object] = {"kind": kind, "paths": paths, "reason": reason}
    if body:
        args["body"] = body
    return TIDY_CHILD_TOOL, args
