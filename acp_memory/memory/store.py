"""The note store: list, read, mkdir, save, write and delete under the roots' rules, plus search.

Every write is redacted, bounded, atomic (temp file, fsync, rename) and done under an exclusive
flock on the root folder itself, which holds across threads and processes alike and puts no
file in the folder people commit (`journaled.py`: the lock and the history).

Every change is journaled with the store's `source`, atomically with the write: in the disk
journal (`history/journal.py`) intent, write, done, all under the root's lock; for a shared
project root (`memory.shared`) in its database, one transaction holding the project's lock that
commits before the local copy is written (the copy only ever lags the server, never leads it).
Reading a shared root catches its local copy up first (at most once a second).

A store owns the search indexes and the journal it opens unless it is given shared ones;
`close()` (or `with`) releases what it owns, after writing the read stamps it collected.
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from acp_memory.atomic import write_atomic
from acp_memory.config import Config, Paths
from acp_memory.llm.embeddings import Embeddings, embeddings_for
from acp_memory.memory.history.journal import Journal
from acp_memory.memory.history.journals import Journals
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.history.runs import RunCost
from acp_memory.memory.history.states import EMPTY_FOLDER, Captured, capture, remove
from acp_memory.memory.index.indexes import DEFAULT_MAX_ROOTS, ClosedOnExit, SearchIndexes
from acp_memory.memory.journaled import (
    JournaledRoots,
    NoteError,
    SharedProject,
    shared_project,
)
from acp_memory.memory.redact import Redaction, redact
from acp_memory.memory.roots import (
    NOTE_SUFFIXES,
    SCOPES,
    CheckedRoots,
    FolderEntry,
    Location,
    Roots,
    is_note_name,
    scope_name,
    visible_entries,
)
from acp_memory.memory.search import Hits, search_notes
from acp_memory.text.naming import name_from_title

log = logging.getLogger(__name__)

CLI = ChangeSource("cli")  # the surface a store's changes come from unless it is told

@dataclass(frozen=True)
class SaveResult:
    """What a write did: where, whether it replaced a note, its size and the secrets removed."""

    path: str
    updated: bool
    size: int
    previous_size: int | None
    redaction: Redaction
    change_id: str | None = None  # the write in the history (None when nothing is recorded)


@dataclass(frozen=True)
class DeleteResult:
    path: str
    was_folder: bool
    notes_removed: int
    change_id: str | None = None  # the delete in the history, for its undo


def indexes_for(cfg: Config, paths: Paths) -> SearchIndexes:
    """The search indexes of the cache folder, with the embeddings the config names."""
    return SearchIndexes(paths.cache_dir, cfg.memory.index_max_roots, embeddings_for(cfg))


def journal_for(cfg: Config, paths: Paths) -> Journal:
    """The journal of every note change in a root on disk, under the home (never inside a
    root)."""
    return Journal(paths.history_dir / "journal.sqlite3", cfg.memory.history_days,
                   cfg.memory.pending_days)


class MemoryStore(JournaledRoots, ClosedOnExit):
    """The notes of a global and a project root, with search backed by a cache-folder index."""

    def __init__(
        self,
        roots: Roots,
        cache_dir: Path,
        max_note_bytes: int = 16 * 1024,
        lock_timeout: float = 10.0,
        *,
        indexes: SearchIndexes | None = None,
        max_index_roots: int = DEFAULT_MAX_ROOTS,
        embeddings: Embeddings | None = None,
        journal: Journal | Journals | None = None,
        source: ChangeSource = CLI,
        shared: SharedProject | None = None,
    ) -> None:
        super().__init__(roots, indexes or SearchIndexes(cache_dir, max_index_roots, embeddings),
                         journal, source, shared, lock_timeout)
        self.cache_dir = cache_dir
        self.max_note_bytes = max_note_bytes
        self._owns_indexes = indexes is None
        self._said_unavailable = False  # the embeddings' failure is told once per store
        self._owns_journal = False

    @classmethod
    def from_config(
        cls,
        cfg: Config,
        paths: Paths,
        cwd: Path | None = None,
        indexes: SearchIndexes | None = None,
        *,
        journal: Journal | None = None,
        source: ChangeSource = CLI,
    ) -> MemoryStore:
        """The store for a session: roots from config and cwd, the index under paths.cache_dir.

        Give every session's store the same `indexes` so that a root is indexed once per
        process; without one the store opens its own (with the configured embeddings), which
        `close()` releases. The same goes for the disk journal (a shared project root's
        belongs to the process).
        """
        roots = Roots.from_config(cfg, paths, cwd)
        shared = shared_project(cfg, paths, roots)
        store = cls(roots, paths.cache_dir, cfg.memory.max_note_bytes, indexes=indexes,
                    max_index_roots=cfg.memory.index_max_roots,
                    embeddings=embeddings_for(cfg) if indexes is None else None,
                    journal=Journals(journal or journal_for(cfg, paths),
                                     [shared.journal] if shared else []),
                    source=source, shared=shared)
        store._owns_journal = journal is None
        if shared is not None:  # every surface's keeper (`notes index`, HTTP) shares vectors
            shared.share_vectors(store.indexes)
        return store

    def close(self, run: RunCost | None = None) -> None:
        """Write the read stamps collected (and the cost of the memory run ending, when
        given, in the same journal transaction), then close the search indexes and the
        journal this store opened (shared ones belong to their owner)."""
        self._write_reads(run)
        if self._owns_indexes:
            self.indexes.close()
        if self._owns_journal and self.journal is not None:
            self.journal.close()

    # -- reading -------------------------------------------------------------------------------

    def list_dir(self, path: str) -> tuple[Location, list[FolderEntry]]:
        """One level of a folder, folders first; a missing folder is an empty listing."""
        loc = self.locate(path)
        self.refresh((loc.scope,))
        if loc.path.is_file():
            raise NoteError(f"{loc.display} is a note, not a folder; read it instead")
        entries = sorted(visible_entries(loc), key=lambda e: (not e.is_dir, e.loc.parts[-1]))
        return loc, entries

    def read(self, path: str) -> tuple[Location, str]:
        """The whole text of a note."""
        loc, data, _ = self.read_bytes(path)
        return loc, data.decode("utf-8", errors="replace")

    def read_bytes(self, path: str,
                   checked: CheckedRoots | None = None) -> tuple[Location, bytes, float]:
        """A note's bytes as they are on disk, and the modification time of those bytes
        (`checked`: as `Roots.join`'s)."""
        loc = self.note_location(path, checked)
        self.refresh((loc.scope,))
        if loc.path.is_dir():
            raise NoteError(f"{loc.display} is a folder; list it to see its notes")
        try:
            with open(loc.path, "rb") as f:
                return loc, f.read(), os.fstat(f.fileno()).st_mtime
        except FileNotFoundError:
            msg = f"no note at {loc.display}; search or list to find the right path"
            raise NoteError(msg) from None
        except OSError as exc:
            raise NoteError(f"cannot read {loc.display}: {exc.strerror}") from None

    def search(self, query: str, scope: str = "both", limit: int = 8) -> Hits:
        """Ranked notes for a query in global, project (or workspace) or both scopes."""
        scope = scope_name(scope)
        if scope == "both":
            scopes = self.roots.scopes()
        elif scope in SCOPES:
            self.locate(f"{scope}:")  # a refused project root says why
            scopes = (scope,)
        else:
            raise NoteError(f"unknown scope {scope!r}; use global, project or both")
        if not query.strip():
            raise NoteError("the query is empty; give a few words or an identifier")
        if limit < 1:
            raise NoteError(f"the limit is {limit}; ask for at least 1 hit")
        offline = self.refresh(scopes)
        hits = search_notes(self.roots, self.indexes, query, scopes, limit)
        hits.offline = offline
        if hits.unavailable:
            if self._said_unavailable:
                hits.unavailable = ""
            else:
                self._said_unavailable = True
                log.warning("embeddings unavailable: %s; searching by words only",
                            hits.unavailable)
        return hits

    # -- writing -------------------------------------------------------------------------------

    def mkdir(self, path: str) -> tuple[Location, bool]:
        """Create a folder (and its parents); False when it already existed."""
        loc = self.locate(path)
        if loc.is_root:
            return loc, False
        if loc.parts[-1].lower().endswith(NOTE_SUFFIXES):
            raise NoteError(f"{loc.display} ends like a note; folder names cannot end .md/.txt")
        with self._locked(loc, "create the folder"):
            self._ensure_inside(loc)
            if loc.path.is_dir():
                return loc, False
            if loc.path.exists():
                raise NoteError(f"{loc.display} exists and is a note, not a folder")
            with self.recording(loc, "mkdir", Captured(None), EMPTY_FOLDER):
                loc.path.mkdir(parents=True)
        return loc, True

    def save(
        self, title: str, body: str, scope: str, relative_path: str | None = None
    ) -> SaveResult:
        """Save a note named from its title into relative_path (a folder, or itself a note path)."""
        self._check_size(body, "the note body")
        path, title_red = self.save_target(title, scope, relative_path)
        return self.write(path, body, extra=title_red)

    def save_target(
        self, title: str, scope: str, relative_path: str | None = None
    ) -> tuple[str, Redaction]:
        """The `scope:path` save() writes, and the title's redaction."""
        self._check_size(title, "the title")
        title_red = redact(title.strip())
        if not title_red.text:
            raise NoteError("the title is empty; give the note a short descriptive title")
        # Only trailing slashes go: a leading one makes the path absolute, which is refused.
        rel = (relative_path or "").strip().rstrip("/")
        if not is_note_name(rel.rsplit("/", 1)[-1]):
            rel = f"{rel}/{name_from_title(title_red.text)}" if rel else name_from_title(
                title_red.text
            )
        into = scope_name(scope)
        if into not in SCOPES:
            raise NoteError(f"unknown scope {scope!r}; save into global or project")
        return f"{into}:{rel}", title_red

    def write(
        self,
        path: str,
        content: str,
        extra: Redaction | None = None,
        *,
        if_unchanged: str | None = None,
    ) -> SaveResult:
        """Write a note's whole content at path (created or replaced), after redaction.

        With if_unchanged (the text the caller started from, "" for a new note), the write is
        refused when someone else changed the note in the meantime.
        """
        loc, red, data = self.prepare_write(path, content, extra)
        with self._locked(loc, "save"):
            self._ensure_inside(loc)
            if loc.path.is_dir():
                raise NoteError(f"{loc.display} is a folder; choose a note path ending in .md")
            try:
                current: bytes | None = loc.path.read_bytes()
            except FileNotFoundError:
                current = None
            if if_unchanged is not None and (current or b"") != if_unchanged.encode("utf-8"):
                raise NoteError(
                    f"{loc.display} was changed by someone else since you opened it; "
                    "nothing was written"
                )
            previous = len(current) if current is not None else None
            # Under the lock no one else is writing this note: a temporary file of it is what
            # a writer killed mid-save left behind.
            for stale in loc.path.parent.glob(f".{glob.escape(loc.path.name)}.*.tmp"):
                stale.unlink(missing_ok=True)
            before = Captured(None) if current is None else Captured.note(current)
            with self.recording(loc, "create" if current is None else "update", before,
                                Captured.note(data, redacted=True)) as change_id:
                write_atomic(loc.path, data)
        return SaveResult(loc.display, previous is not None, len(data), previous, red, change_id)

    def prepare_write(
        self, path: str, content: str, extra: Redaction | None = None
    ) -> tuple[Location, Redaction, bytes]:
        """What write() would write at path, checked and redacted, without writing: its
        location, the redaction and the bytes."""
        loc = self.note_location(path)
        # Refused before redaction, which runs on a worker thread a cancel cannot stop: its
        # time is bounded by the limit, not by what a caller sends.
        self._check_size(content, "the note body")
        red = redact(content)
        if extra is not None:
            red.removed.update(extra.removed)
        if not red.text.strip():
            raise NoteError("the note body is empty; to remove a note, delete it")
        # Redaction can lengthen a note ("pw: x" becomes "pw: [REDACTED:password]").
        data = self._check_size(red.text, "the note body", " after redaction" if red.count else "")
        return loc, red, data

    def plan_delete(self, path: str) -> DeleteResult:
        """What delete(path) would remove, without removing anything."""
        loc = self._deletable(path)
        if loc.path.is_dir() and not loc.path.is_symlink():
            return DeleteResult(loc.display + "/", True, sum(1 for _ in _notes_under(loc.path)))
        _check_note_target(loc)
        return DeleteResult(loc.display, False, 1)

    def delete(
        self, path: str, *, folders: bool = True, if_state: str | None = None
    ) -> DeleteResult:
        """Delete a note, or (unless folders is False) a folder with everything under it.

        A root is never deleted. With if_state (the journal state of what the caller showed,
        `history/states.py`), the delete is refused when the path holds anything else now.
        """
        loc = self._deletable(path)
        with self._locked(loc, "delete"):
            self._ensure_inside(loc)
            target = loc.path
            if if_state is not None and capture(target).state != if_state:
                raise NoteError(f"{loc.display} was changed by someone else since it was shown; "
                                "nothing was deleted")
            if target.is_dir() and not target.is_symlink():
                if not folders:
                    raise NoteError(f"{loc.display}/ is a folder; nothing was deleted")
                count = sum(1 for _ in _notes_under(target))
                with self.recording(loc, "rmdir", capture(target), Captured(None)) as change_id:
                    remove(target)
                return DeleteResult(loc.display + "/", True, count, change_id)
            _check_note_target(loc)
            with self.recording(loc, "delete", capture(target), Captured(None)) as change_id:
                target.unlink()
            return DeleteResult(loc.display, False, 1, change_id)

    def _deletable(self, path: str) -> Location:
        loc = self.locate(path)
        if loc.is_root:
            raise NoteError(f"{loc.scope}: is a root and is never deleted; delete what is inside")
        return loc

    # -- helpers -------------------------------------------------------------------------------

    def _check_size(self, text: str, what: str, after: str = "") -> bytes:
        """text as UTF-8, or NoteError when that is over the note size limit."""
        data = text.encode("utf-8")
        if len(data) > self.max_note_bytes:
            raise NoteError(
                f"{what} is {len(data)} bytes of UTF-8{after}, over the limit of "
                f"{self.max_note_bytes} bytes; nothing was written. Split it into smaller notes "
                f"or shorten it."
            )
        return data

    def note_location(self, path: str, checked: CheckedRoots | None = None) -> Location:
        """The checked location of a note path (refused unless it ends in .md or .txt)."""
        loc = self.locate(path, checked)
        if not loc.is_note_path:
            raise NoteError(
                f"{loc.display or path} is not a note path; notes end in .md or .txt "
                "(e.g. global:notes/todo.md)"
            )
        return loc


def _check_note_target(loc: Location) -> None:
    target = loc.path
    if not target.exists() and not target.is_symlink():
        raise NoteError(f"no note or folder at {loc.display}; nothing was deleted")
    if not is_note_name(target.name):
        raise NoteError(f"{loc.display} is not a note; only .md and .txt files are notes")


def _notes_under(folder: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if is_note_name(name):
                yield Path(dirpath) / name
