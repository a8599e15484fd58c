"""Kodik's inline memory: the notes of both roots, loaded into the system prompt at session/new.

Each scope becomes one `<memory scope="...">` block (`workspace` is the project root), most
recently changed notes first, each inside a `<note path="...">` element. A scope holds at most
MAX_NOTES notes and MAX_LINES lines of note text, a note at most MAX_NOTE_BYTES; every cut says
so with a marker line. The caller stores the snapshot in the session bundle, so the session
keeps it (and its prompt-cache prefix) while later saves wait for the next session.

Reads files: call it off the event loop.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from html import escape
from pathlib import Path

from acp_memory.config import Config, Paths
from acp_memory.memory.journaled import shared_project
from acp_memory.memory.roots import (
    FolderEntry,
    Location,
    MemoryPathError,
    Roots,
    visible_entries,
)

log = logging.getLogger(__name__)

MAX_NOTES = 50
MAX_LINES = 200
MAX_NOTE_BYTES = 16 * 1024
# (the tag's scope, the roots' scope), in the order the blocks appear.
SCOPES = (("workspace", "project"), ("global", "global"))


@dataclass(frozen=True)
class _Note:
    path: str  # relative to its root
    file: Path
    mtime: float


def session_memory(cfg: Config, paths: Paths, cwd: str) -> str | None:
    """The snapshot for a new session in cwd, or None when memory.inline is off."""
    if not cfg.memory.inline:
        return None
    roots = Roots.from_config(cfg, paths, Path(cwd))
    if (shared := shared_project(cfg, paths, roots)) is not None:
        shared.refresh()  # the team's notes as they are now (offline: the copy as it stands)
    return snapshot(roots)


def snapshot(roots: Roots) -> str:
    """Both scopes' blocks; a scope without notes says so rather than vanishing."""
    blocks = []
    for tag, scope in SCOPES:
        if scope in roots.scopes():
            try:
                root = roots.join(scope, "")
            except MemoryPathError as exc:  # the project root became a link out just now
                log.warning("inline memory: %s", exc)
                continue
            blocks.append(scope_block(tag, root))
    return "\n\n".join(blocks)


def scope_block(tag: str, root: Location) -> str:
    """One scope's notes, newest first, within the note, line and byte bounds."""
    notes = sorted(_notes(root), key=lambda n: (-n.mtime, n.path))
    lines = [f'<memory scope="{tag}">']
    used = loaded = 0
    for index, note in enumerate(notes):
        left = len(notes) - index
        if loaded == MAX_NOTES or used >= MAX_LINES:
            bound = f"{MAX_NOTES} notes" if loaded == MAX_NOTES else f"{MAX_LINES} lines of notes"
            lines.append(f"[{_more(left)} not loaded: at most {bound} per scope]")
            break
        read = _read(note.file)
        if read is None:
            continue
        text, size = read
        loaded += 1
        body = text.splitlines()
        room = MAX_LINES - used
        lines.append(f'<note path="{escape(note.path)}">')
        lines += body[:room]
        used += min(len(body), room)
        if len(body) > room:
            rest = f"; {_more(left - 1)} not loaded" if left > 1 else ""
            lines.append(
                f"[note cut after {room} of its {len(body)} lines: at most {MAX_LINES} lines "
                f"of notes per scope{rest}]"
            )
            lines.append("</note>")
            break
        if size > MAX_NOTE_BYTES:
            lines.append(
                f"[note cut at {MAX_NOTE_BYTES // 1024} KB: its whole text is {size} bytes]"
            )
        lines.append("</note>")
    if not notes:
        lines.append("(no notes)")
    lines.append("</memory>")
    return "\n".join(lines)


def _more(count: int) -> str:
    return f"{count} more {'note' if count == 1 else 'notes'}"


def _notes(root: Location) -> list[_Note]:
    """Every note under root, folders included; a symlinked folder is walked once."""
    found: list[_Note] = []
    seen: set[str] = set()
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            real = os.path.realpath(folder.path)
            if real in seen:
                continue
            seen.add(real)
            entries: list[FolderEntry] = list(visible_entries(folder))
        except (OSError, MemoryPathError) as exc:
            log.warning("inline memory: cannot list %s: %s", folder.path, exc)
            continue
        for entry in entries:
            if entry.is_dir:
                pending.append(entry.loc)
            else:
                found.append(_Note(entry.loc.rel, entry.loc.path, entry.mtime))
    return found


def _read(file: Path) -> tuple[str, int] | None:
    """At most MAX_NOTE_BYTES of a note, cut on a character boundary, and its whole size."""
    try:
        with file.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            data = f.read(MAX_NOTE_BYTES + 1)
    except OSError as exc:
        log.warning("inline memory: cannot read %s: %s", file, exc)
        return None
    if len(data) <= MAX_NOTE_BYTES:
        return data.decode("utf-8", errors="replace"), len(data)
    cut = MAX_NOTE_BYTES
    while cut > 0 and data[cut] & 0xC0 == 0x80:  # never split a character's bytes
        cut -= 1
    return data[:cut].decode("utf-8", errors="replace"), max(size, len(data))
