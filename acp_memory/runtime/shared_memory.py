"""The shared project roots (`memory.shared`) of the sessions one surface serves: each
database's listener in the runner's task group, the outage said once per session, the notes
of `<cwd>/memory` not yet in the shared store said once per process and folder, and the
vectors shared through the server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio.to_thread
from anyio.abc import TaskGroup

from acp_memory.config import Config, Paths
from acp_memory.memory.index.files import note_paths
from acp_memory.memory.index.indexes import SearchIndexes
from acp_memory.memory.roots import Roots
from acp_memory.memory.shared.key import unshared_line

if TYPE_CHECKING:  # psycopg is loaded with the first shared root, not with the runner
    from acp_memory.memory.shared.database import Database
    from acp_memory.memory.shared.listener import Listener, Watched
    from acp_memory.memory.shared.root import SharedRoot

log = logging.getLogger(__name__)


class SharedMemory:
    """The shared roots in use by this surface's sessions (see the module)."""

    def __init__(self, cfg: Config, paths: Paths, owner: Callable[[], TaskGroup]) -> None:
        self.cfg = cfg
        self.paths = paths
        self._owner = owner  # raises RuntimeError once the runner stopped
        self.listeners: dict[str, Listener] = {}  # by DSN: one per database
        self._roots: dict[str, SharedRoot] = {}  # by key
        self._seq: dict[str, int] = {}  # by key: the copy's seq at its last refresh
        self._indexes: SearchIndexes | None = None
        self._sessions: dict[str, str] = {}  # session id -> the key of its project root
        self._told: set[str] = set()  # sessions told the server cannot be reached
        self._hints: dict[str, set[Path]] = {}  # key -> `<cwd>/memory` folders to look at
        self._looked: set[Path] = set()  # ... looked at once already (or about to be)
        self._off: set[Path] = set()  # cwds told they have no project key

    def open(self, session_id: str, roots: Roots, indexes: SearchIndexes) -> SharedRoot | None:
        """A session opened with roots: when its project root is shared, keep it caught up
        from now on (its first catch-up starts at once, in the background); its SharedRoot,
        or None when the project scope is on disk."""
        key = roots.shared_key
        if key is None:
            self._why_not_shared(roots)
            return None
        from acp_memory.memory.shared.root import shared_root_for

        root = shared_root_for(self.cfg, self.paths, key)
        self._roots[key] = root
        self._indexes = indexes
        root.share_vectors(indexes)
        self._sessions[session_id] = key
        if roots.cwd is not None and (folder := roots.cwd / "memory") not in self._looked:
            self._looked.add(folder)
            self._hints.setdefault(key, set()).add(folder)
        try:
            self._listener(root.database).watch(root)
        except RuntimeError:  # the runner is not running: every read catches up by itself
            pass
        return root

    def _why_not_shared(self, roots: Roots) -> None:
        """memory.shared is on but the cwd has no project key: said once per cwd."""
        if not self.cfg.memory.shared.dsn.strip() or roots.cwd is None:
            return
        if roots.cwd not in self._off:
            self._off.add(roots.cwd)
            log.warning("%s", unshared_line(self.cfg.memory.shared.project, roots.cwd,
                                            roots.project_root))

    def closed(self, session_id: str) -> None:
        """The session went: it is told of an outage again when it opens again."""
        self._sessions.pop(session_id, None)
        self._told.discard(session_id)

    def close(self) -> None:
        """The runner stopped (its task group ended the listeners)."""
        self.listeners.clear()
        self._sessions.clear()
        self._told.clear()

    def _listener(self, database: Database) -> Listener:
        listener = self.listeners.get(database.dsn)
        if listener is None:
            from acp_memory.memory.shared.listener import Listener

            owner = self._owner()
            listener = Listener(database.dsn, database.masked, self._refreshed)
            owner.start_soon(listener.run, name=f"shared memory {database.masked}")
            self.listeners[database.dsn] = listener
        return listener

    def _refreshed(self, watched: Watched, offline: str | None) -> None:
        """After each catch-up of a root by its listener: say an outage to the sessions not
        yet told; once caught up, the index follows the copy and the import hint is due."""
        root = self._roots.get(watched.key)
        if root is None:
            return
        if offline is not None:
            self._tell_outage(root)
            return
        seq = root.copy.seq()
        if self._seq.get(root.key) != seq and self._indexes is not None:
            self._seq[root.key] = seq
            self._indexes.notes_changed(root.root)  # with embeddings: the new notes' vectors
        if folders := self._hints.pop(root.key, None):
            try:
                for folder in folders:
                    self._owner().start_soon(self._hint, root, folder)
            except RuntimeError:
                pass

    def _tell_outage(self, root: SharedRoot) -> None:
        untold = [s for s, key in self._sessions.items() if key == root.key
                  and s not in self._told]
        if not untold:
            return
        self._told.update(untold)
        # One line for the sessions that see it now, not one per session: it is the same news.
        log.warning("%s", outage_line(root.database))

    async def _hint(self, root: SharedRoot, folder: Path) -> None:
        count = await anyio.to_thread.run_sync(not_imported, folder, root.root)
        if count:
            notes = "a note" if count == 1 else f"{count} notes"
            log.warning("%s holds %s not in the shared project memory (project (shared: %s)); "
                        "copy them there with `acp-memory notes import project: %s`",
                        folder, notes, root.key, folder)


def outage_line(database: Database) -> str:
    """The one line a session gets when the shared server cannot be reached."""
    error = database.last_error or f"shared project memory {database.masked}: cannot connect"
    return f"{error}; searching the local copy, writes refused"


def not_imported(folder: Path, root: Path) -> int:
    """How many notes under folder (a disk project root) have no note at their path in root
    (the shared root's local copy)."""
    if not folder.is_dir():
        return 0
    return sum(1 for rel, _ in note_paths(folder) if not (root / rel).is_file())
