"""A project root `<cwd>/memory` linking out of the workspace (a cloned repository can ship
one) is refused on every surface unless memory.project_root_symlinks allows it; the global
root may link anywhere."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pydantic
import pytest

from acp_memory.config import Config, Paths
from acp_memory.config.models import MemoryConfig
from acp_memory.memory.direct import DirectMemoryTool
from acp_memory.memory.inline import session_memory
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.memory.tools import memory_tools
from acp_memory.tools.base import ToolContext
from acp_memory.tools.registry import ToolSet


@pytest.fixture
def outside(paths: Paths) -> Path:
    """A folder outside the workspace, holding someone's note, that `<cwd>/memory` links to."""
    target = paths.home.parent / "elsewhere"
    target.mkdir()
    (target / "theirs.md").write_text("not ours")
    (paths.cwd / "memory").symlink_to(target, target_is_directory=True)
    return target


def refusal(paths: Paths, outside: Path) -> str:
    return (f"project root {paths.cwd / 'memory'} links outside the workspace to "
            f"{os.path.realpath(outside)}; set memory.project_root_symlinks: allow")


def untouched(outside: Path) -> bool:
    return os.listdir(outside) == ["theirs.md"] and (outside / "theirs.md").read_text() == (
        "not ours"
    )


def test_every_project_call_of_the_store_says_why_and_touches_nothing(
    paths: Paths, outside: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (paths.home / "memory").mkdir(parents=True)
    (paths.home / "memory" / "mine.md").write_text("theirs too")
    with caplog.at_level(logging.WARNING), MemoryStore.from_config(Config(), paths) as store:
        assert store.roots.scopes() == ("global",)
        calls = [
            lambda: store.list_dir("project:"),
            lambda: store.list_dir("workspace:"),
            lambda: store.read("project:theirs.md"),
            lambda: store.save("t", "overwritten", "project", "theirs.md"),
            lambda: store.write("workspace:new.md", "x"),
            lambda: store.mkdir("project:folder"),
            lambda: store.delete("project:theirs.md"),
            lambda: store.search("theirs", "project"),
        ]
        for work in calls:
            with pytest.raises(NoteError) as refused:
                work()
            assert str(refused.value) == refusal(paths, outside)
        assert [h.path for h in store.search("theirs")] == ["global:mine.md"]
    assert untouched(outside)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [refusal(paths, outside)]


@pytest.mark.anyio
async def test_the_six_tools_show_only_the_global_root(paths: Paths, outside: Path) -> None:
    cfg = Config()
    ctx = ToolContext("sess_" + "0" * 24, paths.cwd, "agent")
    with MemoryStore.from_config(cfg, paths) as store:
        tools = {t.name: t for t in memory_tools(store, cfg.memory)}
        listing = await tools["memory_list"].run({}, ctx)
        saved = await tools["memory_save"].run(
            {"title": "theirs", "body": "overwritten", "scope": "project"}, ctx
        )
    assert not listing.is_error and listing.text == "global: is empty (no notes or folders)."
    assert saved.is_error and saved.text == f"Error: {refusal(paths, outside)}"
    assert untouched(outside)


@pytest.mark.anyio
async def test_the_inline_snapshot_and_tool_leave_the_workspace_out(
    paths: Paths, outside: Path
) -> None:
    cfg = Config(memory=MemoryConfig(inline=True))
    snapshot = session_memory(cfg, paths, str(paths.cwd))
    assert snapshot == '<memory scope="global">\n(no notes)\n</memory>'
    tools = ToolSet([DirectMemoryTool(cfg, paths)])
    ctx = ToolContext("sess_" + "0" * 24, paths.cwd, "agent")
    for scope in ("workspace", "project"):
        args = {"scope": scope, "path": "theirs", "content": "overwritten"}
        result = await tools.execute("memory", json.dumps(args), ctx)
        assert result.is_error and result.text == f"Error: {refusal(paths, outside)}"
    assert untouched(outside)


def test_allow_takes_the_link_and_false_means_refuse(paths: Paths, outside: Path) -> None:
    allow = Config.model_validate({"memory": {"project_root_symlinks": "allow"}})
    with MemoryStore.from_config(allow, paths) as store:
        assert store.roots.scopes() == ("global", "project")
        store.write("project:ours.md", "written through the link")
    assert (outside / "ours.md").read_text() == "written through the link"
    off = Config.model_validate({"memory": {"project_root_symlinks": False}})
    assert off.memory.project_root_symlinks == "refuse"
    with pytest.raises(pydantic.ValidationError, match="'refuse' or 'allow'"):
        Config.model_validate({"memory": {"project_root_symlinks": "sometimes"}})


def test_a_link_inside_the_workspace_and_a_global_root_linking_out_are_fine(
    paths: Paths, tmp_path: Path
) -> None:
    (paths.cwd / "docs" / "notes").mkdir(parents=True)
    (paths.cwd / "memory").symlink_to(paths.cwd / "docs" / "notes")
    vault = tmp_path / "vault"
    vault.mkdir()
    (tmp_path / "vault-link").symlink_to(vault)
    cfg = Config(memory=MemoryConfig(dir=str(tmp_path / "vault-link")))
    with MemoryStore.from_config(cfg, paths) as store:
        assert store.roots.scopes() == ("global", "project")
        store.write("project:a.md", "in the workspace")
        store.write("global:b.md", "in the vault")
    assert (paths.cwd / "docs" / "notes" / "a.md").read_text() == "in the workspace"
    assert (vault / "b.md").read_text() == "in the vault"


def test_a_link_that_appears_after_the_store_opened_is_refused_too(
    paths: Paths, tmp_path: Path
) -> None:
    with MemoryStore.from_config(Config(), paths) as store:
        assert store.roots.scopes() == ("global", "project")
        elsewhere = tmp_path / "later"
        elsewhere.mkdir()
        (paths.cwd / "memory").symlink_to(elsewhere)  # a checkout brought it mid-session
        with pytest.raises(NoteError, match="links outside the workspace"):
            store.write("project:a.md", "x")
        assert store.roots.scopes() == ("global",)
    assert os.listdir(elsewhere) == []
