"""Keeping an index in step with the files, which are the source of truth.

The first refresh walks the root comparing (mtime, size, inode) per note; later ones re-index
only the files that inotify reported. Without inotify (not Linux, or out of watches) every
refresh walks the tree, which is slower but just as correct.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from acp_memory.memory.roots import is_note_name
from acp_memory.memory.watch import Watcher
from acp_memory.paths import resolves_inside
from acp_memory.text.analyze import analyze, document_terms, tokens

log = logging.getLogger(__name__)

Stat = tuple[int, int, int]


def path_terms(rel: str) -> str:
    """The path column: exact forms and stems of the words in a note's relative path."""
    stem_of_path = rel.rsplit(".", 1)[0]
    out: list[str] = []
    for token in tokens(stem_of_path):
        a = analyze(token)
        out.extend((a.whole, *a.stems))
    return " ".join(out)


class FileSync:
    """Brings one root's index up to date with its files; not thread-safe (the index locks)."""

    def __init__(self, root: Path, db: sqlite3.Connection) -> None:
        self.root = root
        self._db = db
        self._watcher: Watcher | None = None
        self._synced = False

    def refresh(self) -> None:
        """Bring the index up to date with the files on disk."""
        if self._synced and self._watcher is not None:
            changes = self._watcher.drain()
            if not changes.rescan:
                if changes.files:
                    stats = {rel: self._stat(rel) for rel in changes.files}
                    self._apply(stats, forced=changes.files)
                return
        self._full_sync()

    def close(self) -> None:
        """Stop watching the root; the next refresh walks it again."""
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
        self._synced = False

    def _full_sync(self) -> None:
        self.close()
        watcher: Watcher | None
        try:
            watcher = Watcher() if self.root.is_dir() else None
        except OSError:
            watcher = None
        try:
            seen = dict(self._walk(watcher))
        except OSError as exc:
            # Out of inotify watches, most likely: fall back to a walk on every search.
            log.info("search index for %s runs without change notification: %s", self.root, exc)
            if watcher is not None:
                watcher.close()
            watcher = None
            seen = dict(self._walk(None))
        known = {row[0] for row in self._db.execute("SELECT path FROM files")}
        updates: dict[str, Stat | None] = dict(seen)
        updates.update({rel: None for rel in known - seen.keys()})
        self._apply(updates, forced=set())
        self._watcher = watcher
        self._synced = watcher is not None

    def _walk(self, watcher: Watcher | None) -> Iterator[tuple[str, Stat]]:
        real_root = self.root.resolve()
        stack = [(str(self.root), "")]
        while stack:
            folder, rel = stack.pop()
            if watcher is not None:
                watcher.add(folder, rel)  # before listing, so nothing slips between the two
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
                            st = entry.stat()
                            yield child, (st.st_mtime_ns, st.st_size, st.st_ino)
                    except OSError:
                        continue

    def _stat(self, rel: str) -> Stat | None:
        path = self.root / rel
        try:
            if path.is_symlink() and not resolves_inside(path, self.root.resolve()):
                return None
            st = path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino) if path.is_file() else None

    def _apply(self, updates: dict[str, Stat | None], forced: set[str]) -> None:
        """Re-index changed notes and drop vanished ones, in one transaction."""
        if not updates:
            return
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for rel, stat in updates.items():
                row = db.execute(
                    "SELECT id, mtime_ns, size, ino FROM files WHERE path = ?", (rel,)
                ).fetchone()
                if stat is None or not is_note_name(rel.rsplit("/", 1)[-1]):
                    if row is not None:
                        db.execute("DELETE FROM files WHERE id = ?", (row[0],))
                        db.execute("DELETE FROM fts WHERE rowid = ?", (row[0],))
                    continue
                if row is not None and tuple(row[1:]) == stat and rel not in forced:
                    continue
                self._index_file(db, rel, stat, row[0] if row else None)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _index_file(self, db: sqlite3.Connection, rel: str, stat: Stat, rowid: int | None) -> None:
        try:
            text = (self.root / rel).read_bytes().decode("utf-8", errors="replace")
        except OSError:
            return
        exact, stems = document_terms(text)
        if rowid is None:
            rowid = db.execute(
                "INSERT INTO files(path, mtime_ns, size, ino) VALUES (?, ?, ?, ?)", (rel, *stat)
            ).lastrowid
        else:
            db.execute(
                "UPDATE files SET mtime_ns = ?, size = ?, ino = ? WHERE id = ?", (*stat, rowid)
            )
            db.execute("DELETE FROM fts WHERE rowid = ?", (rowid,))
        db.execute(
            "INSERT INTO fts(rowid, path, exact, stems) VALUES (?, ?, ?, ?)",
            (rowid, path_terms(rel), exact, stems),
        )
