"""The two note roots, `scope:rel/path` parsing, and the rules keeping paths inside their root."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from acp_memory.config import Config, Paths
from acp_memory.config.loader import expand
from acp_memory.paths import resolves_inside

log = logging.getLogger(__name__)

SCOPES = ("global", "project")
# A scope's root and its real path, checked once for many paths (`Roots.join`).
CheckedRoots = dict[str, tuple[Path, Path]]

# HTTP, the web page and the inline tool call the project root `workspace`; input takes either.
SCOPE_ALIASES = {"workspace": "project"}
NOTE_SUFFIXES = (".md", ".txt")
PATH_FORM = "scope:relative/path.md with scope global or project (e.g. global:notes/todo.md)"

_DRIVE = re.compile(r"^[A-Za-z]:")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")


class MemoryPathError(ValueError):
    """A note path that is malformed or would leave its root; the message is for a model."""


def is_note_name(name: str) -> bool:
    """Only visible .md and .txt files are notes."""
    return not name.startswith(".") and name.lower().endswith(NOTE_SUFFIXES)


@dataclass(frozen=True)
class Location:
    """A checked place inside one root: its scope, its relative parts and its absolute path."""

    scope: str
    parts: tuple[str, ...]
    root: Path
    path: Path

    @property
    def rel(self) -> str:
        return "/".join(self.parts)

    @property
    def is_root(self) -> bool:
        return not self.parts

    @property
    def display(self) -> str:
        """The `scope:rel` form shown to models and users (folders may add a slash)."""
        return f"{self.scope}:{self.rel}"

    @property
    def is_note_path(self) -> bool:
        return bool(self.parts) and is_note_name(self.parts[-1])

    def child(self, name: str) -> Location:
        return Location(self.scope, (*self.parts, name), self.root, self.path / name)


def scope_name(name: str) -> str:
    """The store's name for a scope given as input: `workspace` is `project`."""
    return SCOPE_ALIASES.get(name, name)


def split_scoped(text: str) -> tuple[str, str]:
    """Split `scope:rel` into its scope and relative part; a bare path is an error."""
    if not isinstance(text, str) or not text.strip():
        raise MemoryPathError(f"a path is required, in the form {PATH_FORM}")
    text = text.strip()
    if scope_name(text) in SCOPES:
        return scope_name(text), ""
    named, sep, rel = text.partition(":")
    if not sep:
        raise MemoryPathError(f"{text!r} has no scope; write it as {PATH_FORM}")
    scope = scope_name(named)
    if scope not in SCOPES:
        raise MemoryPathError(f"unknown scope {scope!r} in {text!r}; write paths as {PATH_FORM}")
    return scope, "" if rel == "/" else rel


def check_relative(rel: str) -> tuple[str, ...]:
    """The safe parts of a relative path, or MemoryPathError saying what is wrong with it."""
    _check_plain(rel, rel)
    decoded = rel
    for _ in range(3):  # double-encoded %252e%252e must not slip through either
        if not _PERCENT.search(decoded):
            break
        decoded = unquote(decoded)
        try:
            _check_plain(decoded, rel)
        except MemoryPathError as exc:
            raise MemoryPathError(f"percent-encoded traversal refused: {exc}") from None
    return tuple(p for p in rel.split("/") if p)


def _check_plain(rel: str, shown: str) -> None:
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in rel):
        raise MemoryPathError(f"{shown!r} contains NUL, control or unpaired surrogate characters")
    if "\\" in rel:
        raise MemoryPathError(f"{shown!r} contains a backslash; separate folders with '/'")
    if rel.startswith("/") or rel.startswith("~"):
        raise MemoryPathError(f"{shown!r} is absolute; give a path relative to the scope's root")
    if _DRIVE.match(rel):
        raise MemoryPathError(f"{shown!r} starts with a drive letter; paths are relative")
    for part in rel.split("/"):
        if part in (".", ".."):
            raise MemoryPathError(f"{shown!r} has a {part!r} segment; '..' and '.' are refused")
        if part.startswith("."):
            raise MemoryPathError(f"{shown!r} names a hidden entry ({part!r}); those are not notes")
        if len(part.encode("utf-8")) > 255:
            raise MemoryPathError(f"a segment of {shown!r} is longer than 255 bytes")


@dataclass(frozen=True)
class Roots:
    """The global root and, when a session has a cwd, the project root `<cwd>/memory`."""

    global_root: Path
    project_root: Path | None = None
    # The folder the project root must resolve into (the session's cwd), or None when it may
    # link anywhere (memory.project_root_symlinks: allow). The global root may always link
    # out: people point it at a vault.
    workspace: Path | None = None
    # The session's cwd, against which the paths a note cites are checked.
    cwd: Path | None = None
    # The project's key when its notes are shared (`memory.shared`): the project root is then
    # this process's local copy of them, a cache under the home (`shared_copy_folder`).
    shared_key: str | None = None

    @classmethod
    def from_config(cls, cfg: Config, paths: Paths, cwd: Path | None = None) -> Roots:
        """Global root: memory.dir or `<home>/memory`; project root: `<cwd or paths.cwd>/memory`,
        or with `memory.shared.dsn` set and a project key for the cwd, the local copy of the
        key's shared notes."""
        configured = cfg.memory.dir.strip()
        global_root = Path(expand(configured)).absolute() if configured else (
            paths.home / "memory").absolute()
        project_cwd = Path(cwd if cwd is not None else paths.cwd).absolute()
        if cfg.memory.shared.dsn.strip():
            from acp_memory.memory.shared.key import project_key  # git runs only when shared

            key, _ = project_key(cfg.memory.shared.project, project_cwd)  # why: the runtime's
            if key is not None:
                notes = shared_copy_folder(paths.cache_dir, key) / "notes"
                return cls(global_root, notes, None, project_cwd, key)
        refuse = cfg.memory.project_root_symlinks == "refuse"
        return cls(global_root, project_cwd / "memory", project_cwd if refuse else None,
                   project_cwd)

    def project_refusal(self) -> str | None:
        """Why the project root is refused (it links outside the workspace), or None.

        Checked on every use rather than once: a cloned repository can ship the link, and a
        checkout can bring it at any time.
        """
        if self.project_root is None or self.workspace is None:
            return None
        if resolves_inside(self.project_root, self.workspace.resolve()):
            return None
        return (
            f"project root {self.project_root} links outside the workspace to "
            f"{os.path.realpath(self.project_root)}; set memory.project_root_symlinks: allow"
        )

    def scopes(self) -> tuple[str, ...]:
        """The scopes in use: a missing or refused project root is absent (a refused one is
        logged once; a call naming it gets the reason as its error)."""
        if self.project_root is None:
            return ("global",)
        if refusal := self.project_refusal():
            _warn_once(refusal)
            return ("global",)
        return SCOPES

    def dirs(self) -> list[Path]:
        """The folders of the scopes in use, global first."""
        return [self.root_of(scope) for scope in self.scopes()]

    def root_of(self, scope: str) -> Path:
        if scope == "global":
            return self.global_root
        if scope == "project" and self.project_root is not None:
            if refusal := self.project_refusal():
                raise MemoryPathError(refusal)
            return self.project_root
        if scope == "project":
            raise MemoryPathError("this session has no project root (no working directory)")
        raise MemoryPathError(f"unknown scope {scope!r}; use global or project")

    def locate(self, text: str, checked: CheckedRoots | None = None) -> Location:
        """Parse and check `scope:rel`; refuses anything that could resolve outside its root."""
        scope, rel = split_scoped(text)
        return self.join(scope, rel, checked)

    def join(self, scope: str, rel: str, checked: CheckedRoots | None = None) -> Location:
        """Check a relative path under a scope's root (the same rules as locate). Paths
        checked together (a search's hits) share `checked`: each root is checked and
        resolved once for all of them, each path still on its own."""
        if checked is None or scope not in checked:
            root = self.root_of(scope)
            real_root = root.resolve()
            if checked is not None:
                checked[scope] = (root, real_root)
        else:
            root, real_root = checked[scope]
        parts = check_relative(rel)
        loc = Location(scope, parts, root, root.joinpath(*parts))
        ensure_inside(loc, real_root)
        return loc


def shared_copy_folder(cache_dir: Path, key: str) -> Path:
    """The folder of this process's local copy of the shared notes of key (the notes under its
    `notes`), named by the key's hash: a key is a URL-like string, not a safe file name."""
    return cache_dir / "shared" / hashlib.sha256(key.encode("utf-8")).hexdigest()


_warned: set[str] = set()


def _warn_once(reason: str) -> None:
    # Every listing asks again; the person reading the log needs the line once a process.
    if reason not in _warned:
        _warned.add(reason)
        log.warning("%s", reason)


def ensure_inside(loc: Location, real_root: Path | None = None) -> None:
    """Refuse a location whose real path (after symlinks) is outside its real root (given
    when known)."""
    if not resolves_inside(loc.path, real_root or loc.root.resolve()):
        raise MemoryPathError(f"{loc.display} resolves outside the {loc.scope} root (symlink)")


@dataclass(frozen=True)
class FolderEntry:
    """One visible child of a folder: a subfolder or a note."""

    loc: Location
    is_dir: bool
    size: int
    mtime: float


def visible_entries(folder: Location) -> Iterator[FolderEntry]:
    """A folder's notes and subfolders; dot-entries, other files and escaping symlinks skipped."""
    real_root = folder.root.resolve()
    try:
        it = os.scandir(folder.path)
    except (FileNotFoundError, NotADirectoryError):
        return
    with it:
        for entry in it:
            if entry.name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir()
                if not is_dir and not is_note_name(entry.name):
                    continue
                if entry.is_symlink() and not resolves_inside(entry.path, real_root):
                    continue
                st = entry.stat()
            except OSError:
                continue  # vanished or unreadable between scandir and stat
            yield FolderEntry(folder.child(entry.name), is_dir, st.st_size, st.st_mtime)
