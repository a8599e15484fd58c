"""Listing, reading, naming, saving, limits and deletion in the note store."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest

from acp_memory.memory import rootlock as rootlock_module
from acp_memory.memory import store as store_module
from acp_memory.memory.journaled import LEGACY_LOCK_NAME
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.text.naming import MAX_NAME_CHARS, name_from_title


def test_list_shows_one_level_with_size_and_mtime(store: MemoryStore) -> None:
    store.save("Top", "top note", "global")
    store.save("Deep", "deep note", "global", "a/b")
    _, entries = store.list_dir("global:")
    assert [(e.loc.display, e.is_dir) for e in entries] == [
        ("global:a", True), ("global:top.md", False)
    ]
    note = entries[1]
    assert note.size == len(b"top note") and note.mtime > 0


def test_missing_folder_lists_empty(store: MemoryStore) -> None:
    assert store.list_dir("project:nowhere/deeper")[1] == []


def test_only_md_and_txt_are_notes_and_dot_entries_are_skipped(store: MemoryStore) -> None:
    root = store.roots.global_root
    (root / ".hidden").mkdir(parents=True)
    (root / ".hidden" / "x.md").write_text("hidden")
    (root / ".dot.md").write_text("dot")
    (root / "image.png").write_bytes(b"\x89PNG")
    (root / "notes.txt").write_text("plain text note")
    (root / "a.md").write_text("markdown note")
    names = [e.loc.display for e in store.list_dir("global:")[1]]
    assert names == ["global:a.md", "global:notes.txt"]
    with pytest.raises(NoteError, match=r"\.md or \.txt"):
        store.read("global:image.png")
    with pytest.raises(NoteError, match="hidden"):
        store.read("global:.dot.md")
    assert [h.path for h in store.search("hidden dot")] == []


def test_read_returns_whole_note_and_missing_note_is_a_clear_error(store: MemoryStore) -> None:
    body = "line\n" * 1000
    store.write("global:long.md", body)
    assert store.read("global:long.md")[1] == body
    with pytest.raises(NoteError, match=r"no note at global:missing\.md"):
        store.read("global:missing.md")


def test_save_names_the_file_from_the_title(store: MemoryStore) -> None:
    result = store.save("Deploy keys: rotation & policy!", "body", "global")
    assert result.path == "global:deploy-keys-rotation-policy.md"
    assert (store.roots.global_root / "deploy-keys-rotation-policy.md").read_text() == "body"


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ("Кошки и собаки", "кошки-и-собаки.md"),
        ("  --Hello,   World--  ", "hello-world.md"),
        ("日本語 メモ", "日本語-メモ.md"),
        ("café №5", "café-5.md"),
    ],
)
def test_title_names_keep_unicode_letters_and_collapse_the_rest(title: str, name: str) -> None:
    assert name_from_title(title) == name


def test_title_names_are_bounded_and_never_empty() -> None:
    assert len(name_from_title("x" * 500)) == MAX_NAME_CHARS + len(".md")
    assert len(name_from_title("я" * 500).encode()) <= 255
    odd = name_from_title("!!! ???")
    assert odd.startswith("note-") and odd.endswith(".md")
    assert name_from_title("!!!") != name_from_title("???")


def test_save_with_relative_path_puts_the_note_in_that_folder(store: MemoryStore) -> None:
    assert store.save("API", "x", "project", "architecture").path == "project:architecture/api.md"
    assert store.save("API", "y", "project", "docs/http.md").path == "project:docs/http.md"


def test_saving_onto_an_existing_note_says_updated(store: MemoryStore) -> None:
    first = store.save("Prefs", "tabs", "global")
    second = store.save("Prefs", "spaces", "global")
    assert not first.updated and second.updated and second.previous_size == 4
    assert store.read("global:prefs.md")[1] == "spaces"


def test_body_over_the_limit_is_refused_whole_with_length_and_limit(store: MemoryStore) -> None:
    body = "я" * 8193  # 16,386 bytes of UTF-8, 8,193 characters
    with pytest.raises(NoteError, match=r"16386 bytes.*limit of 16384 bytes"):
        store.save("Big", body, "global")
    assert not (store.roots.global_root / "big.md").exists()
    exact = "я" * 8192  # exactly at the limit: kept, not cut
    store.save("Big", exact, "global")
    assert store.read("global:big.md")[1] == exact


def test_cyrillic_note_of_600_characters_is_kept_whole(store: MemoryStore) -> None:
    body = ("Маша любит кошек и пишет заметки. " * 20)[:600]
    assert len(body) == 600
    store.save("Заметка", body, "project")
    assert store.read("project:заметка.md")[1] == body


def test_limit_is_configurable(tmp_path: Path, store: MemoryStore) -> None:
    small = MemoryStore(store.roots, tmp_path / "c", max_note_bytes=10)
    with pytest.raises(NoteError, match="11 bytes"):
        small.save("t", "01234567890", "global")


def test_empty_body_and_folder_target_are_refused(store: MemoryStore) -> None:
    with pytest.raises(NoteError, match="empty"):
        store.save("t", "  \n", "global")
    store.mkdir("global:dir.d")
    with pytest.raises(NoteError, match="not a note path"):
        store.write("global:dir.d", "x")


def test_mkdir_creates_parents_and_reports_existing(store: MemoryStore) -> None:
    loc, created = store.mkdir("project:a/b/c")
    assert created and loc.path.is_dir()
    assert store.mkdir("project:a/b/c")[1] is False
    with pytest.raises(NoteError, match="folder names"):
        store.mkdir("project:x.md")


def test_delete_removes_a_note_or_a_folder_tree_but_never_a_root(store: MemoryStore) -> None:
    store.save("one", "1", "global", "f")
    store.save("two", "2", "global", "f/g")
    store.save("keep", "k", "global")
    result = store.delete("global:f")
    assert result.was_folder and result.notes_removed == 2
    assert not (store.roots.global_root / "f").exists()
    assert store.delete("global:keep.md").notes_removed == 1
    for root in ("global:", "global", "project:", "global:/"):
        with pytest.raises(NoteError, match="root"):
            store.delete(root)
    assert store.roots.global_root.is_dir()
    with pytest.raises(NoteError, match="nothing was deleted"):
        store.delete("global:gone.md")


def test_writes_leave_no_lock_file_in_the_root_people_commit(store: MemoryStore) -> None:
    store.save("x", "y", "project")
    store.mkdir("project:folder")
    store.delete("project:folder")
    assert os.listdir(store.roots.project_root) == ["x.md"]


def test_the_lock_file_earlier_versions_left_in_a_root_goes_at_the_next_write(
    store: MemoryStore,
) -> None:
    root = store.roots.project_root
    assert root is not None
    root.mkdir(parents=True)
    (root / LEGACY_LOCK_NAME).touch()
    store.save("x", "y", "project")
    assert os.listdir(root) == ["x.md"]


def test_two_homes_on_one_project_take_the_same_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "work" / "memory"
    first = MemoryStore(Roots(tmp_path / "h1" / "memory", project), tmp_path / "c1")
    second = MemoryStore(Roots(tmp_path / "h2" / "memory", project), tmp_path / "c2",
                         lock_timeout=0.05)
    write_atomic = store_module.write_atomic

    def the_other_home_writes_meanwhile(path: Path, data: bytes) -> None:
        # `first` holds the project root's lock here: `second` must wait for it.
        monkeypatch.setattr(store_module, "write_atomic", write_atomic)
        with pytest.raises(NoteError, match="project root is locked by another process"):
            second.write("project:b.md", "from the second home")
        write_atomic(path, data)

    monkeypatch.setattr(store_module, "write_atomic", the_other_home_writes_meanwhile)
    first.write("project:a.md", "from the first home")
    assert os.listdir(project) == ["a.md"]


@pytest.mark.parametrize("action", ["save", "mkdir", "delete"])
def test_a_folder_swapped_for_a_link_out_of_the_root_before_the_lock_is_refused_under_it(
    store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    root = store.roots.global_root
    store.write("global:notes/keep.md", "inside")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.md").write_text("theirs")
    acquire = rootlock_module._acquire

    def swap_once_locked(fd: int, scope: str, timeout: float) -> None:
        # Between the path's first check and the work: the race the check under the lock closes.
        acquire(fd, scope, timeout)
        shutil.rmtree(root / "notes")
        (root / "notes").symlink_to(outside, target_is_directory=True)

    monkeypatch.setattr(rootlock_module, "_acquire", swap_once_locked)
    work = {
        "save": lambda: store.write("global:notes/victim.md", "overwritten"),
        "mkdir": lambda: store.mkdir("global:notes/made"),
        "delete": lambda: store.delete("global:notes/victim.md"),
    }[action]
    with pytest.raises(NoteError, match="resolves outside the global root"):
        work()
    assert os.listdir(outside) == ["victim.md"]
    assert (outside / "victim.md").read_text() == "theirs"


def test_a_root_locked_by_another_process_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    root.mkdir()
    store = MemoryStore(Roots(root), tmp_path / "cache", lock_timeout=0.05)
    holder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        # flock locks belong to the open file: a second open in this process contends too.
        fcntl.flock(holder, fcntl.LOCK_EX)
        with pytest.raises(NoteError, match="locked by another process"):
            store.write("global:a.md", "text")
        assert not (root / "a.md").exists()
    finally:
        os.close(holder)
    store.write("global:a.md", "text")
    assert (root / "a.md").read_text() == "text"


def test_a_save_sweeps_the_temporary_file_a_killed_writer_left(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    (root / "notes").mkdir(parents=True)
    leftover = root / "notes" / ".todo.md.k1ll3d.tmp"  # what write_atomic leaves on SIGKILL
    leftover.write_text("half a no")
    other = root / "notes" / ".other.md.x.tmp"
    other.write_text("belongs to another note")
    MemoryStore(Roots(root), tmp_path / "cache").write("global:notes/todo.md", "whole")
    assert not leftover.exists() and other.exists()
    assert (root / "notes" / "todo.md").read_text() == "whole"


@pytest.mark.parametrize("where", ["body", "title"])
def test_oversize_input_is_refused_before_any_redaction(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    # Redaction runs on a thread that a cancelled tool call cannot stop: an oversize input
    # must never reach it.
    def no_redaction(text: str) -> object:
        raise AssertionError(f"redact ran on {len(text)} characters")

    monkeypatch.setattr(store_module, "redact", no_redaction)
    huge = "password: hunter22 " * 60_000
    title, body = (huge, "short") if where == "title" else ("short", huge)
    with pytest.raises(NoteError, match=rf"{len(huge)} bytes.*limit of 16384"):
        store.save(title, body, "global")
    with pytest.raises(NoteError, match="limit of 16384"):
        store.write("global:big.md", huge)
    assert not store.roots.global_root.exists() or not any(store.roots.global_root.iterdir())
