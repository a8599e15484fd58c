"""The six tools: schemas, plain-text results, and errors returned as tool results."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import anyio
import jsonschema
import pytest

from acp_memory.config.models import MemoryConfig
from acp_memory.memory import store as store_module
from acp_memory.memory.store import MemoryStore
from acp_memory.memory.tools import memory_tools
from acp_memory.tools.base import Tool, ToolContext, ToolResult

CTX = ToolContext(session_id="sess_test", cwd=Path("/"), mode="agent")


@pytest.fixture
def tools(store: MemoryStore) -> dict[str, Tool]:
    return {t.name: t for t in memory_tools(store, MemoryConfig(max_search_hits=3))}


async def call(tools: dict[str, Tool], name: str, **args: object) -> ToolResult:
    return await tools[name].run(args, CTX)


def test_six_tools_with_valid_schemas_and_the_read_only_set(tools: dict[str, Tool]) -> None:
    assert sorted(tools) == sorted(
        ["memory_search", "memory_list", "memory_read", "memory_mkdir", "memory_save",
         "memory_delete"]
    )
    for tool in tools.values():
        jsonschema.Draft202012Validator.check_schema(dict(tool.parameters))
    args = {"path": "global:x.md", "query": "rotation keys", "title": "Team prefs"}
    assert {name: tool.title(args) for name, tool in tools.items()} == {
        "memory_search": "Memory Search rotation keys",
        "memory_list": "Memory List global:x.md",
        "memory_read": "Memory Read global:x.md",
        "memory_mkdir": "Memory Mkdir global:x.md",
        "memory_save": "Memory Save Team prefs",
        "memory_delete": "Memory Delete global:x.md",
    }
    assert tools["memory_list"].title({}) == "Memory List"
    assert {n for n, t in tools.items() if t.read_only} == {
        "memory_search", "memory_list", "memory_read"
    }


@pytest.mark.anyio
async def test_save_then_update_read_list_search_and_delete(tools: dict[str, Tool]) -> None:
    saved = await call(tools, "memory_save", title="Team prefs", body="Use tabs.", scope="global")
    assert not saved.is_error and saved.text.startswith("saved new note global:team-prefs.md")
    updated = await call(tools, "memory_save", title="Team prefs", body="Spaces.", scope="global")
    assert updated.text.startswith("updated global:team-prefs.md") and "saved" not in updated.text
    read = await call(tools, "memory_read", path="global:team-prefs.md")
    assert read.text.endswith("by hand edit\n\nSpaces.")  # no journal: the file time
    listing = await call(tools, "memory_list", path="global:")
    assert "global:team-prefs.md" in listing.text and "7 bytes" in listing.text
    found = await call(tools, "memory_search", query="spaces", scope="both")
    assert "global:team-prefs.md (score" in found.text
    assert (await call(tools, "memory_mkdir", path="project:arch")).text == (
        "created folder project:arch/"
    )
    deleted = await call(tools, "memory_delete", path="global:team-prefs.md")
    assert deleted.text == "deleted note global:team-prefs.md."
    await call(tools, "memory_save", title="one", body="1", scope="project",
               relative_path="arch")
    folder = await call(tools, "memory_delete", path="project:arch")
    assert folder.text == "deleted folder project:arch/ and the 1 note under it."


@pytest.mark.anyio
async def test_search_without_hits_says_so_and_respects_max_hits(tools: dict[str, Tool]) -> None:
    none = await call(tools, "memory_search", query="nothing-like-this")
    assert not none.is_error and none.text.startswith("no matching notes")
    for i in range(5):
        await call(tools, "memory_save", title=f"pear {i}", body="pear", scope="project")
    found = await call(tools, "memory_search", query="pear", scope="project")
    assert found.text.count("project:pear-") == 3
    assert found.text.startswith("showing 3 of 5 matching notes for 'pear' in project")


@pytest.mark.anyio
async def test_workspace_is_taken_for_project_and_answers_say_project(
    tools: dict[str, Tool],
) -> None:
    saved = await call(tools, "memory_save", title="pear", body="ripe", scope="workspace")
    assert saved.text == "saved new note project:pear.md (4 bytes)."
    found = await call(tools, "memory_search", query="ripe", scope="workspace")
    assert found.text.startswith("1 matching note for 'ripe' in project (best first):")
    listing = await call(tools, "memory_list", path="workspace:")
    assert "project:pear.md" in listing.text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("memory_read", {"path": "global:missing.md"}, "no note at global:missing.md"),
        ("memory_read", {"path": "notes.md"}, "scope:relative/path.md"),
        ("memory_read", {"path": "global:../x.md"}, "'..'"),
        ("memory_read", {}, "must be a string"),
        ("memory_save", {"title": "t", "body": "x" * 20000, "scope": "global"},
         "20000 bytes of UTF-8, over the limit of 16384"),
        ("memory_save", {"title": "t", "body": "b", "scope": "elsewhere"}, "unknown scope"),
        ("memory_delete", {"path": "project:"}, "never deleted"),
        ("memory_search", {"query": "x", "scope": "nowhere"}, "unknown scope"),
        ("memory_search", {"query": "  "}, "query is empty"),
        ("memory_list", {"path": "global:a\x00b"}, "control"),
    ],
)
async def test_errors_come_back_as_tool_results(
    tools: dict[str, Tool], name: str, args: dict[str, object], message: str
) -> None:
    result = await tools[name].run(args, CTX)
    assert result.is_error and result.text.startswith("Error: ") and message in result.text


@pytest.mark.anyio
async def test_save_result_lists_the_secrets_removed(tools: dict[str, Tool]) -> None:
    result = await call(tools, "memory_save", title="db", body="password: hunter22",
                        scope="project")
    assert "Removed 1 secret" in result.text and "password" in result.text


@pytest.mark.anyio
async def test_list_without_path_shows_both_roots_and_missing_folder_is_empty(
    tools: dict[str, Tool],
) -> None:
    both = await call(tools, "memory_list")
    assert "global: is empty" in both.text and "project: is empty" in both.text
    missing = await call(tools, "memory_list", path="project:no/such/folder")
    assert not missing.is_error and "is empty" in missing.text


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and folder under folder."""
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
            for p in sorted(folder.rglob("*"))}


@pytest.mark.anyio
@pytest.mark.parametrize("relative_path", ["/etc", "/etc/abs.md", "../up", "a\\b"])
async def test_save_refuses_an_escaping_relative_path_and_writes_nothing(
    tools: dict[str, Tool], tmp_path: Path, relative_path: str
) -> None:
    before = snapshot(tmp_path)
    result = await call(
        tools, "memory_save", title="t", body="b", scope="global", relative_path=relative_path
    )
    assert result.is_error
    assert snapshot(tmp_path) == before
    # An absolute path would escape the temporary tree altogether.
    assert not any(map(os.path.exists, ["/etc/t.md", "/etc/abs.md"]))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("memory_read", {"path": "global:a\ud800.md"}),
        ("memory_save", {"title": "t", "body": "bad \ud800 body", "scope": "global"}),
    ],
)
async def test_text_no_file_system_can_hold_is_a_tool_error(
    tools: dict[str, Tool], name: str, args: dict[str, str]
) -> None:
    result = await tools[name].run(args, CTX)
    assert result.is_error and result.text.startswith("Error")


@pytest.mark.anyio
async def test_a_symlink_loop_is_a_tool_error(tools: dict[str, Tool], roots) -> None:
    roots.global_root.mkdir(parents=True)
    (roots.global_root / "loop.md").symlink_to(roots.global_root / "loop.md")
    result = await call(tools, "memory_read", path="global:loop.md")
    assert result.is_error


@pytest.mark.anyio
async def test_a_save_cancelled_mid_write_returns_only_once_the_note_is_whole(
    tools: dict[str, Tool], store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await call(tools, "memory_save", title="plan", body="old plan", scope="global")
    note = store.roots.global_root / "plan.md"
    writing, release, written = threading.Event(), threading.Event(), threading.Event()
    write_atomic = store_module.write_atomic

    def held_write(path: Path, data: bytes) -> None:
        writing.set()
        release.wait()
        write_atomic(path, data)
        written.set()

    monkeypatch.setattr(store_module, "write_atomic", held_write)
    seen_on_return: list[str] = []
    scope = anyio.CancelScope()

    async def save() -> None:
        with scope:
            try:
                await call(tools, "memory_save", title="plan", body="new plan", scope="global")
            finally:
                seen_on_return.append(note.read_text())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(save)
            await anyio.to_thread.run_sync(writing.wait, abandon_on_cancel=True)
            scope.cancel()
            # An abandoned write would let the call return here, the note not yet written.
            await anyio.wait_all_tasks_blocked()
            release.set()
        await anyio.to_thread.run_sync(written.wait, abandon_on_cancel=True)
    # What the cancelled caller saw is final: the save completed before the call returned.
    assert seen_on_return == ["new plan"]
    assert note.read_text() == "new plan"
