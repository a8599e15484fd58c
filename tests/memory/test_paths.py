"""scope:rel parsing and the rules that keep every path inside its root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_memory.config import Config
from acp_memory.config.loader import resolve_paths
from acp_memory.memory.roots import MemoryPathError, Roots
from acp_memory.memory.store import MemoryStore, NoteError


def test_scoped_path_resolves_under_its_root(roots: Roots) -> None:
    loc = roots.locate("project:architecture/api.md")
    assert loc.path == roots.project_root / "architecture" / "api.md"
    assert loc.display == "project:architecture/api.md"
    assert roots.locate("global:").is_root and roots.locate("global").is_root


@pytest.mark.parametrize("text", ["workspace:architecture/api.md", "workspace", "workspace:"])
def test_workspace_is_the_project_root_under_the_name_http_and_the_inline_tool_use(
    roots: Roots, text: str
) -> None:
    loc = roots.locate(text)
    assert loc.scope == "project" and loc.root == roots.project_root
    assert loc.display == "project:" + text.partition(":")[2]


@pytest.mark.parametrize("bad", ["notes/todo.md", "todo.md", "work:a.md", "home:a.md", ""])
def test_bare_path_or_unknown_scope_names_the_expected_form(roots: Roots, bad: str) -> None:
    with pytest.raises(MemoryPathError, match=r"scope"):
        roots.locate(bad)


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("global:../escape.md", r"'\.\.'"),
        ("global:a/../../escape.md", r"'\.\.'"),
        ("global:/etc/passwd", "absolute"),
        ("global:~/x.md", "absolute"),
        ("global:C:/Windows/x.md", "drive letter"),
        ("global:c:x.md", "drive letter"),
        ("global:a\\..\\b.md", "backslash"),
        ("global:a\x00.md", "control"),
        ("global:a\nb.md", "control"),
        ("global:%2e%2e/escape.md", "percent-encoded"),
        ("global:%2E%2E%2Fescape.md", "percent-encoded"),
        ("global:%252e%252e/escape.md", "percent-encoded"),
        ("global:a%00.md", "percent-encoded"),
        ("global:.hidden.md", "hidden"),
        ("global:.git/config.md", "hidden"),
    ],
)
def test_traversal_and_odd_paths_are_refused_with_a_reason(
    roots: Roots, bad: str, why: str
) -> None:
    with pytest.raises(MemoryPathError, match=why):
        roots.locate(bad)


def test_symlink_escaping_the_root_is_refused_and_nothing_is_written(
    store: MemoryStore, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    store.roots.global_root.mkdir(parents=True)
    os.symlink(outside, store.roots.global_root / "link")
    with pytest.raises(NoteError, match="outside"):
        store.write("global:link/x.md", "hello")
    with pytest.raises(NoteError, match="outside"):
        store.read("global:link/x.md")
    with pytest.raises(NoteError, match="outside"):
        store.delete("global:link")
    assert list(outside.iterdir()) == []
    assert outside.exists()


def test_symlinked_note_pointing_outside_is_invisible_to_listing(
    store: MemoryStore, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("outside")
    root = store.roots.global_root
    root.mkdir(parents=True)
    os.symlink(secret, root / "leak.md")
    (root / "ok.md").write_text("inside")
    _, entries = store.list_dir("global:")
    assert [e.loc.display for e in entries] == ["global:ok.md"]
    assert store.search("outside") == []


def test_roots_come_from_config_and_cwd(tmp_path: Path) -> None:
    paths = resolve_paths(home=str(tmp_path / "h"), cwd=str(tmp_path / "w"))
    roots = Roots.from_config(Config(), paths)
    assert roots.global_root == tmp_path / "h" / "memory"
    assert roots.project_root == tmp_path / "w" / "memory"
    cfg = Config.model_validate({"memory": {"dir": str(tmp_path / "notes")}})
    assert Roots.from_config(cfg, paths, cwd=tmp_path / "other").global_root == tmp_path / "notes"
    assert Roots.from_config(cfg, paths, cwd=tmp_path / "other").project_root == (
        tmp_path / "other" / "memory"
    )


_SEGMENT = st.one_of(
    st.sampled_from(
        ["..", ".", "", "%2e%2e", "%2E%2e%2f", "..\\", "C:", "/", "~", "a", "b.md",
         "out", "out/x.md", "loop", "dangling", "inside", "inside/n.md"]
    ),
    # Every code point, surrogates and control characters included.
    st.text(alphabet=st.characters(exclude_categories=()), min_size=1, max_size=6),
)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Roots:
    """Two real roots with symlinks planted: one leading out, a loop, a dangling one, one in."""
    base = tmp_path_factory.mktemp("planted")
    outside = base / "outside"
    outside.mkdir()
    (outside / "x.md").write_text("not yours")
    roots = Roots(base / "global", base / "project")
    for root in (roots.global_root, roots.project_root):
        assert root is not None
        (root / "real").mkdir(parents=True)
        (root / "out").symlink_to(outside)
        (root / "loop").symlink_to(root / "loop")
        (root / "dangling").symlink_to(base / "nowhere")
        (root / "inside").symlink_to(root / "real")
    return roots


@settings(max_examples=400, deadline=None)
@given(scope=st.sampled_from(["global", "project"]), segments=st.lists(_SEGMENT, max_size=6))
def test_no_generated_path_escapes_its_root(
    planted: Roots, scope: str, segments: list[str]
) -> None:
    text = f"{scope}:" + "/".join(segments)
    try:
        loc = planted.locate(text)
    except MemoryPathError:
        return
    real_root = planted.root_of(scope).resolve()
    real = loc.path.resolve()  # symlinks followed: where a write would really land
    assert real == real_root or real_root in real.parents
    assert ".." not in loc.parts and all(p and not p.startswith(".") for p in loc.parts)
