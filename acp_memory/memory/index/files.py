"""The notes of a root as the index sees them: walked with their stamps, read as text.

One walk serves the index build and the direct scan, so both see the same notes: visible `.md`
and `.txt` files, hidden folders skipped, a symlink only when it stays inside the root.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from acp_memory.memory.index.terms import read_note as read_note
from acp_memory.memory.roots import is_note_name
from acp_memory.paths import resolves_inside

# (mtime_ns, size, inode): a note whose stamp is unchanged is not read again.
Stamp = tuple[int, int, int]


def walk_notes(
    root: Path, on_folder: Callable[[str, str], None] | None = None
) -> Iterator[tuple[str, Stamp]]:
    """Every note under root as (path relative to root, stamp); `on_folder(path, rel)` is
    called for each folder before it is listed (the index adds its change watch there)."""
    for rel, entry in _notes(root, on_folder):
        try:
            st = entry.stat()
        except OSError:
            continue
        yield rel, (st.st_mtime_ns, st.st_size, st.st_ino)


def note_paths(root: Path) -> Iterator[tuple[str, str]]:
    """Every note under root as (path relative to root, full path), without the stat call a
    stamp takes (the direct scan reads every file anyway)."""
    for rel, entry in _notes(root, None):
        yield rel, entry.path


def _notes(
    root: Path, on_folder: Callable[[str, str], None] | None
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    real_root = root.resolve()
    stack = [(str(root), "")]
    while stack:
        folder, rel = stack.pop()
        if on_folder is not None:
            on_folder(folder, rel)  # before listing, so nothing slips between the two
        try:
            it = os.scandir(folder)
        except OSError:
            continue
        with it:
            for entry in it:
                if entry.name.startswith("."):
                    continue
                child = f"{rel}/{entry.name}" if rel else entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((entry.path, child))
                    elif is_note_name(entry.name) and entry.is_file():
                        if entry.is_symlink() and not resolves_inside(entry.path, real_root):
                            continue
                        yield child, entry
                except OSError:
                    continue


def stamp_of(root: Path, rel: str) -> Stamp | None:
    """The stamp of one note, None when it is gone, not a file, or links outside the root."""
    path = root / rel
    try:
        if path.is_symlink() and not resolves_inside(path, root.resolve()):
            return None
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino) if path.is_file() else None
