"""What a path in a root holds, as the journal records it, and putting it back.

A state is None (nothing there), `note:<sha256>` (a file's bytes) or `dir:<sha256>` (a folder:
the hash of its manifest, a JSON object of every file, link and subfolder under it). The bytes
behind each hash travel beside the state as `blobs`, stored once by the journal.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from acp_memory.atomic import write_atomic

NOTE = "note:"
DIR = "dir:"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Captured:
    """A state and the blobs it names."""

    state: str | None
    blobs: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def note(cls, data: bytes) -> Captured:
        h = digest(data)
        return cls(NOTE + h, {h: data})


def folder(dirs: list[str], files: dict[str, str], links: dict[str, str],
           blobs: dict[str, bytes]) -> Captured:
    """The state of a folder holding dirs, files (rel: hash) and links (rel: target)."""
    data = json.dumps({"dirs": sorted(dirs), "files": files, "links": links},
                      sort_keys=True, ensure_ascii=False).encode("utf-8")
    return Captured(DIR + digest(data), {**blobs, digest(data): data})


EMPTY_FOLDER = folder([], {}, {}, {})


def capture(path: Path) -> Captured:
    """The state of path now: a folder is walked whole (hidden entries too: an undo brings
    back everything the delete took)."""
    if path.is_symlink() or path.is_file():
        return Captured.note(path.read_bytes()) if path.exists() else Captured(None)
    if not path.is_dir():
        return Captured(None)
    files: dict[str, str] = {}
    links: dict[str, str] = {}
    dirs: list[str] = []
    blobs: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        here = Path(dirpath)
        for name in sorted(dirnames):
            rel = (here / name).relative_to(path).as_posix()
            if (here / name).is_symlink():
                links[rel] = os.readlink(here / name)
            else:
                dirs.append(rel)
        for name in sorted(filenames):
            full = here / name
            rel = full.relative_to(path).as_posix()
            if full.is_symlink():
                links[rel] = os.readlink(full)
            elif full.is_file():
                data = full.read_bytes()
                blobs[digest(data)] = data
                files[rel] = digest(data)
    return folder(dirs, files, links, blobs)


def note_hash(state: str | None) -> str | None:
    """The bytes' hash of a note state; None for a folder or nothing."""
    return state[len(NOTE):] if state and state.startswith(NOTE) else None


def manifest(state: str, blob: Callable[[str], bytes]) -> dict[str, dict[str, str] | list[str]]:
    """The folder a `dir:` state names: {dirs, files, links}."""
    loaded: dict[str, dict[str, str] | list[str]] = json.loads(blob(state[len(DIR):]))
    return loaded


def member(state: str | None, rel: str, blob: Callable[[str], bytes]) -> str | None:
    """The state of rel (inside the folder a state names), or the state itself when rel is ""."""
    if not rel or state is None or not state.startswith(DIR):
        return state if not rel else None
    files = manifest(state, blob)["files"]
    assert isinstance(files, dict)
    h = files.get(rel)
    return NOTE + h if h else None


def apply(path: Path, state: str | None, blob: Callable[[str], bytes]) -> None:
    """Make path hold state: remove what is there, write a note, or bring back a folder
    (merged into one that exists)."""
    if state is None:
        remove(path)
        return
    if state.startswith(NOTE):
        if path.is_dir() and not path.is_symlink():
            remove(path)
        write_atomic(path, blob(state[len(NOTE):]))
        return
    if (path.is_symlink() or path.exists()) and not path.is_dir():
        path.unlink()
    folder = manifest(state, blob)
    path.mkdir(parents=True, exist_ok=True)
    for rel in folder["dirs"]:
        (path / rel).mkdir(parents=True, exist_ok=True)
    files = folder["files"]
    links = folder["links"]
    assert isinstance(files, dict) and isinstance(links, dict)
    for rel, h in files.items():
        write_atomic(path / rel, blob(h))
    for rel, target in links.items():
        with contextlib.suppress(FileExistsError):
            os.symlink(target, path / rel)


def remove(path: Path) -> None:
    """Remove a note or a whole folder; a folder is renamed to a hidden name first, so that no
    reader (or a crash) ever sees it half deleted."""
    if path.is_dir() and not path.is_symlink():
        doomed = path.with_name(f".{path.name}.{secrets.token_hex(4)}.deleting")
        os.rename(path, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
    elif path.is_symlink() or path.exists():
        path.unlink()


def notes_in(state: str | None, blob: Callable[[str], bytes]) -> int:
    """How many files a state holds (1 for a note, 0 for nothing)."""
    if state is None:
        return 0
    if state.startswith(NOTE):
        return 1
    files = manifest(state, blob)["files"]
    return len(files)
