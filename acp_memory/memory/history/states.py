"""What a path in a root holds, as the journal records it, and putting it back.

A state is None (nothing there), `note:<sha256>` (a file's bytes) or `dir:<sha256>` (a folder:
the hash of its manifest, a JSON object of every file, link and subfolder under it). The bytes
behind each hash travel beside the state as `blobs`, stored once by the journal, redacted: a
hash names the bytes that were on disk, which a restore may not give back byte for byte.

A manifest is read from the journal, which anyone with the home can edit: putting one back
refuses, before it writes anything, a path that leaves the root or a link pointing out of it.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from acp_memory.atomic import write_atomic
from acp_memory.memory.roots import MemoryPathError
from acp_memory.paths import resolves_inside

NOTE = "note:"
DIR = "dir:"
CRASH_ENV = "ACP_MEMORY_TEST_CRASH"  # after_journal | after_note | mid_restore: crash points


def crash_point(name: str) -> None:
    """The test hook: with ACP_MEMORY_TEST_CRASH=name the process ends here, at once."""
    if os.environ.get(CRASH_ENV) == name:
        os._exit(3)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Captured:
    """A state and the blobs it names; `redacted` when they are text redacted already (what
    the store writes, the journal's own contents), which the journal stores as it is."""

    state: str | None
    blobs: dict[str, bytes] = field(default_factory=dict)
    redacted: bool = False

    @classmethod
    def note(cls, data: bytes, *, redacted: bool = False) -> Captured:
        h = digest(data)
        return cls(NOTE + h, {h: data}, redacted)


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


def restoring(state: str | None, blob: Callable[[str], bytes]) -> Captured:
    """The state `apply(path, state)` leaves: the stored contents are redacted, so their hash
    may differ from the one the state names."""
    if state is None:
        return Captured(None)
    if state.startswith(NOTE):
        return Captured.note(blob(state[len(NOTE):]), redacted=True)
    folder_ = manifest(state, blob)
    files = {rel: blob(h) for rel, h in _files(folder_).items()}
    return replace(folder(list(_dirs(folder_)), {rel: digest(data) for rel, data in files.items()},
                          dict(_links(folder_)), {digest(data): data for data in files.values()}),
                   redacted=True)


def apply(path: Path, state: str | None, blob: Callable[[str], bytes], *, root: Path) -> None:
    """Make path (inside root) hold state: remove what is there, write a note, or bring back
    a folder (merged into one that exists, else built aside and renamed into place, so that a
    crash leaves no half folder). A manifest naming a path outside root, or a link pointing
    out of it, is a MemoryPathError and nothing is written."""
    if state is None:
        remove(path)
        return
    if state.startswith(NOTE):
        if path.is_dir() and not path.is_symlink():
            remove(path)
        write_atomic(path, blob(state[len(NOTE):]))
        return
    folder_ = manifest(state, blob)
    _check_inside(path, folder_, root.resolve())
    if (path.is_symlink() or path.exists()) and not path.is_dir():
        path.unlink()
    if path.is_dir():
        _build(path, folder_, blob)
        return
    # Under the root's lock no one else restores here: a staging folder is a dead one's.
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.restoring"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = path.with_name(f".{path.name}.{secrets.token_hex(4)}.restoring")
    staging.mkdir(parents=True)
    try:
        _build(staging, folder_, blob)
        os.rename(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _build(path: Path, folder_: dict[str, Any], blob: Callable[[str], bytes]) -> None:
    for rel in _dirs(folder_):
        (path / rel).mkdir(parents=True, exist_ok=True)
    for i, (rel, h) in enumerate(_files(folder_).items()):
        write_atomic(path / rel, blob(h))
        if i == 0:
            crash_point("mid_restore")
    for rel, target in _links(folder_).items():
        with contextlib.suppress(FileExistsError):
            os.symlink(target, path / rel)


def _check_inside(path: Path, folder_: dict[str, Any], real_root: Path) -> None:
    """Every path of a manifest under path, and every link's target, inside the root."""
    links = _links(folder_)
    for rel in [*_dirs(folder_), *_files(folder_), *links]:
        parts = rel.split("/")
        # The parent is what a write goes through: a link already there is replaced, never
        # followed.
        if rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or not (
                resolves_inside(path.joinpath(*parts).parent, real_root)):
            raise MemoryPathError(f"the history's record of the folder lists {rel!r}, which "
                                  "is outside the root; nothing was restored")
    for rel, target in links.items():
        if not resolves_inside(path.joinpath(*rel.split("/")).parent / target, real_root):
            raise MemoryPathError(f"the history's record of the folder has the link {rel!r} "
                                  f"pointing to {target!r}, outside the root; nothing was "
                                  "restored")


def without(state: str, rel: str, blob: Callable[[str], bytes]) -> Captured:
    """A folder's state with rel (and what is under it) left out of its manifest."""
    folder_ = manifest(state, blob)

    def kept(name: str) -> bool:
        return name != rel and not name.startswith(rel + "/")

    return folder([d for d in _dirs(folder_) if kept(d)],
                  {k: h for k, h in _files(folder_).items() if kept(k)},
                  {k: t for k, t in _links(folder_).items() if kept(k)}, {})


def _dirs(folder_: dict[str, Any]) -> list[str]:
    return [str(d) for d in folder_["dirs"]]


def _files(folder_: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in folder_["files"].items()}


def _links(folder_: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in folder_["links"].items()}


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
