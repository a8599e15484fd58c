"""A tidy run's task text: the candidate groups of one root, one line each, as the runtime
writes them and the offline model reads them back.

    - duplicate | project:a.md | project:b.md | why: 3-word shingles overlap 0.91

Paths are newest first; `why` is the candidate finder's one line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

HEADING = "Tidy the notes of {root}: the candidate groups, paths newest first."
_LINE = re.compile(r"^- (?P<kind>[a-z_]+) \| (?P<rest>.+)$", re.MULTILINE)


@dataclass(frozen=True)
class TaskGroup:
    """One candidate group as the task names it."""

    kind: str  # duplicate, contradiction or stale
    paths: tuple[str, ...]  # scope:path, newest first
    why: str


def tidy_task(root: str, groups: Iterable[TaskGroup]) -> str:
    """The task text of a tidy run over root (a scope, e.g. `project:`)."""
    lines = [HEADING.format(root=root), ""]
    for g in groups:
        why = " ".join(g.why.split())
        lines.append(f"- {g.kind} | {' | '.join(g.paths)} | why: {why}")
    return "\n".join(lines)


def task_groups(text: str) -> list[TaskGroup]:
    """The groups a task text names, in order."""
    out: list[TaskGroup] = []
    for m in _LINE.finditer(text):
        fields = [f.strip() for f in m["rest"].split(" | ")]
        why = fields.pop()[len("why:"):].strip() if fields[-1].startswith("why:") else ""
        out.append(TaskGroup(m["kind"], tuple(fields), why))
    return out


def paths_of(groups: Sequence[TaskGroup]) -> list[str]:
    """Every path the groups name, once, in order."""
    return list(dict.fromkeys(p for g in groups for p in g.paths))
