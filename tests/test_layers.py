"""acp_memory keeps the layers docs/architecture.md lists: no import of a layer above, no import
cycle between its packages and top-level modules; and the checker catches both."""

from __future__ import annotations

from pathlib import Path

from layers import read_layers, violations

REPO = Path(__file__).resolve().parents[1]


def test_every_import_stays_in_its_layer_or_goes_below_and_none_makes_a_cycle():
    layers = read_layers((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))
    assert len(layers) >= 5, layers
    problems = violations(REPO / "acp_memory", layers)
    assert not problems, "\n".join(problems)


def write(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package


LAYERS_DOC = """# map

## Layers

1. `low/`, `leaf`
2. `high/`, `__init__`

## Next
"""


def test_an_upward_import_in_a_function_or_under_type_checking_is_caught(tmp_path: Path):
    package = write(
        tmp_path,
        {
            "__init__.py": "",
            "leaf.py": "def f():\n    from pkg.high import thing\n",
            "low/__init__.py": "",
            "low/a.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..high.b import x\n"
            ),
            "high/__init__.py": "",
            "high/b.py": "from pkg.low import a\nimport pkg.leaf\n",
        },
    )
    problems = violations(package, read_layers(LAYERS_DOC))
    assert "pkg/leaf.py:2: leaf (layer 1) imports high/ (layer 2)" in problems
    assert "pkg/low/a.py:3: low/ (layer 1) imports high/ (layer 2)" in problems
    # The downward imports are fine; with the upward ones they make cycles, named as such.
    assert not [p for p in problems if p.startswith("pkg/high/b.py")]


def test_a_cycle_in_one_layer_is_printed_as_a_chain_with_files_and_lines(tmp_path: Path):
    package = write(
        tmp_path,
        {
            "__init__.py": "",
            "leaf.py": "from pkg import low\n",
            "low/__init__.py": "",
            "low/a.py": "from pkg.leaf import thing\n",
            "high/__init__.py": "",
        },
    )
    problems = violations(package, read_layers(LAYERS_DOC))
    assert problems == [
        "import cycle: leaf (pkg/leaf.py:1) -> low/ (pkg/low/a.py:1) -> leaf"
    ], problems


def test_a_module_left_out_of_the_list_or_listed_twice_is_named(tmp_path: Path):
    package = write(
        tmp_path,
        {"__init__.py": "", "leaf.py": "", "stray.py": "", "low/__init__.py": ""},
    )
    problems = violations(package, [["low/", "leaf"], ["leaf", "__init__", "high/"]])
    assert "leaf is listed in layers 1 and 2" in problems
    assert "stray is in no layer of the list" in problems
    assert "high/ is listed but not in the package" in problems
