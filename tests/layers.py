"""The import graph of a package as nodes (its subpackages and top-level modules) and the layers
docs/architecture.md lists, with what breaks the rule: an import of a layer above, or a cycle.

Every import counts: top level, function bodies, `TYPE_CHECKING` blocks, relative imports.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ITEM = re.compile(r"^\d+\.\s+(.*)$")
NAME = re.compile(r"`([A-Za-z_][\w]*/?)`")


@dataclass(frozen=True)
class Edge:
    """One import between two nodes, where it stands."""

    source: str
    target: str
    where: str  # file:line


def read_layers(architecture: str) -> list[list[str]]:
    """The `## Layers` section's numbered list, bottom first: each item's names in backticks
    (`name/` a subpackage, `name` a top-level module)."""
    section = architecture.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    items: list[str] = []
    for line in section.splitlines():
        if match := ITEM.match(line):
            items.append(match[1])
        elif items and line.startswith("   "):  # the item goes on
            items[-1] += " " + line.strip()
        elif items:
            break
    layers = [NAME.findall(item) for item in items]
    if layers and not any("__init__" in names for names in layers):
        layers[0].append("__init__")  # the package itself (its version): the bottom of all
    return layers


def node_of(package: Path, file: Path) -> str:
    """The node a file belongs to: `name/` for a subpackage's files, `name` for a module."""
    parts = file.relative_to(package).parts
    return f"{parts[0]}/" if len(parts) > 1 else parts[0].removesuffix(".py")


def nodes(package: Path) -> set[str]:
    return {node_of(package, f) for f in package.rglob("*.py")}


def imports(package: Path) -> list[Edge]:
    """Every import from one node of the package to another."""
    root = package.name
    known = nodes(package)
    edges = []
    for file in sorted(package.rglob("*.py")):
        source = node_of(package, file)
        dotted = [root, *file.relative_to(package).with_suffix("").parts]
        here = dotted if file.name == "__init__.py" else dotted[:-1]  # the file's package
        for stmt in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            for target in _targets(stmt, root, here, known):
                if target != source:
                    where = f"{file.relative_to(package.parent)}:{stmt.lineno}"  # type: ignore[attr-defined]
                    edges.append(Edge(source, target, where))
    return edges


def _targets(stmt: ast.AST, root: str, here: list[str], known: set[str]) -> list[str]:
    if isinstance(stmt, ast.Import):
        names = [alias.name.split(".") for alias in stmt.names]
    elif isinstance(stmt, ast.ImportFrom):
        base = here[: len(here) - stmt.level + 1] if stmt.level else []
        module = [*base, *(stmt.module.split(".") if stmt.module else [])]
        # `from pkg import mod` names a module: each name may be a node of its own.
        names = [[*module, alias.name] for alias in stmt.names]
    else:
        return []
    found = []
    for name in names:
        if len(name) < 2 or name[0] != root:
            continue
        node = f"{name[1]}/" if f"{name[1]}/" in known else name[1]
        found.append(node if node in known else "__init__")
    return found


def violations(package: Path, layers: list[list[str]]) -> list[str]:
    """What breaks the rule, one line each; empty when the package keeps its layers."""
    layer_of: dict[str, int] = {}
    problems = []
    for number, names in enumerate(layers, start=1):
        for name in names:
            if name in layer_of:
                problems.append(f"{name} is listed in layers {layer_of[name]} and {number}")
            layer_of[name] = number
    present = nodes(package)
    problems += [f"{n} is in no layer of the list" for n in sorted(present - set(layer_of))]
    problems += [f"{n} is listed but not in the package" for n in sorted(set(layer_of) - present)]
    edges = imports(package)
    for edge in edges:
        low, high = layer_of.get(edge.source), layer_of.get(edge.target)
        if low is not None and high is not None and high > low:
            problems.append(
                f"{edge.where}: {edge.source} (layer {low}) imports {edge.target} (layer {high})"
            )
    problems += [f"import cycle: {cycle}" for cycle in cycles(edges)]
    return problems


def cycles(edges: list[Edge]) -> list[str]:
    """Each cycle among the nodes once, as a chain of imports with their file and line."""
    out: dict[str, dict[str, Edge]] = defaultdict(dict)
    for edge in edges:
        out[edge.source].setdefault(edge.target, edge)
    found: list[str] = []
    seen_sets: set[frozenset[str]] = set()
    for start in sorted(out):
        path = _cycle_from(start, out)
        if path and frozenset(e.source for e in path) not in seen_sets:
            seen_sets.add(frozenset(e.source for e in path))
            chain = " -> ".join(f"{e.source} ({e.where})" for e in path)
            found.append(f"{chain} -> {path[0].source}")
    return found


def _cycle_from(start: str, out: dict[str, dict[str, Edge]]) -> list[Edge] | None:
    """The shortest chain of imports from start back to itself (breadth first), or None."""
    frontier: list[tuple[str, list[Edge]]] = [(start, [])]
    visited = {start}
    while frontier:
        following = []
        for node, path in frontier:
            for target, edge in sorted(out.get(node, {}).items()):
                if target == start:
                    return [*path, edge]
                if target not in visited:
                    visited.add(target)
                    following.append((target, [*path, edge]))
        frontier = following
    return None
