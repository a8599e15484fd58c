"""`notes import` and `notes export`: a folder of notes copied into a root through the store
(each note a journaled create or update, with the same redaction and size rules as any save),
and a root's notes written out as files. Neither deletes anything. Any root works, a shared
one (the team's notes in PostgreSQL) being what they are mostly for."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from acp_memory.atomic import write_atomic
from acp_memory.memory.roots import Location, MemoryPathError, check_relative, is_note_name
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.paths import resolves_inside


class TransferStopped(Exception):
    """The copy cannot go on (the shared server went away); str() is the one line."""


@dataclass
class Transfer:
    """What an import or export did, note by note counted."""

    new: int = 0
    updated: int = 0
    unchanged: int = 0
    folders: int = 0  # folders created
    refused: list[tuple[str, str]] = field(default_factory=list)  # (path, why)

    @property
    def copied(self) -> int:
        return self.new + self.updated

    def counts(self, replaced: str) -> str:
        """`10 new, 2 updated, 3 unchanged` (and the refusals)."""
        text = f"{self.new} new, {self.updated} {replaced}, {self.unchanged} unchanged"
        return text + (f", {len(self.refused)} refused" if self.refused else "")


def import_notes(store: MemoryStore, target: str, source: Path,
                 offline: Callable[[], str | None] = lambda: None) -> Transfer:
    """Copy the notes and folders under `source` into the folder `target` (`scope:folder`):
    each note written through `store.write` unless it already holds the same text. A note
    the store refuses is listed and the rest goes on; `offline()` is asked after a refusal
    and, when it says the root cannot be written now, the import stops (TransferStopped)."""
    into = _folder(store, target)
    done = Transfer()
    real_source = source.resolve()
    for rel, is_dir in _walk(source):
        path = f"{into.scope}:{'/'.join((*into.parts, rel))}"
        try:
            if is_dir:
                done.folders += store.mkdir(path)[1]
            elif not resolves_inside(source / rel, real_source):
                done.refused.append((path, f"{source / rel} links outside {source}"))
            else:
                _import_note(store, path, source / rel, done)
        except (NoteError, MemoryPathError) as exc:
            if (why := offline()) is not None:
                raise TransferStopped(why) from None
            done.refused.append((path, str(exc)))
    return done


def _import_note(store: MemoryStore, path: str, file: Path, done: Transfer) -> None:
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise NoteError(f"{file} is not UTF-8 text") from None
    except OSError as exc:
        raise NoteError(f"cannot read {file}: {exc.strerror or exc}") from None
    _, _, data = store.prepare_write(path, text)
    try:
        current: bytes | None = store.read_bytes(path)[1]
    except NoteError:
        current = None  # no note there yet (a folder there: the write says so)
    if current == data:
        done.unchanged += 1
        return
    result = store.write(path, text)
    if result.updated:
        done.updated += 1
    else:
        done.new += 1


def export_notes(store: MemoryStore, source: str, dest: Path) -> Transfer:
    """Write every note under the folder `source` (`scope:folder`) as a file under `dest`
    (folders made; a file already holding the same text left alone; nothing deleted). Each
    path is checked inside `dest` before anything is written there."""
    start = _folder(store, source)
    done = Transfer()
    dest.mkdir(parents=True, exist_ok=True)
    real_dest = dest.resolve()
    for loc in _notes(store, start):
        rel = "/".join(loc.parts[len(start.parts):])
        try:
            parts = check_relative(rel)
            out = dest.joinpath(*parts)
            if not resolves_inside(out, real_dest):
                raise MemoryPathError(f"{out} resolves outside {dest} (symlink)")
            data = store.read_bytes(loc.display)[1]
            try:
                old: bytes | None = out.read_bytes()
            except FileNotFoundError:
                old = None
            if old == data:
                done.unchanged += 1
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            if not resolves_inside(out.parent, real_dest):
                raise MemoryPathError(f"{out.parent} resolves outside {dest} (symlink)")
            write_atomic(out, data)
        except (NoteError, MemoryPathError) as exc:
            done.refused.append((loc.display, str(exc)))
            continue
        except IsADirectoryError:
            done.refused.append((loc.display, f"{out} is a folder"))
            continue
        done.updated += old is not None
        done.new += old is None
    return done


def _folder(store: MemoryStore, path: str) -> Location:
    loc = store.locate(path)
    if loc.is_note_path or loc.path.is_file():
        raise NoteError(f"{loc.display} is a note; name a folder, e.g. {loc.scope}:")
    return loc


def _walk(source: Path) -> Iterator[tuple[str, bool]]:
    """The visible folders and notes under source, relative, parents first, in name order."""
    for top, dirs, files in os.walk(source):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        here = Path(top).relative_to(source)
        for name in dirs:
            yield (here / name).as_posix(), True
        for name in sorted(files):
            if is_note_name(name):
                yield (here / name).as_posix(), False


def _notes(store: MemoryStore, folder: Location) -> Iterator[Location]:
    """Every note under a folder of a root, depth first, as the store lists them."""
    _, entries = store.list_dir(folder.display)
    for entry in entries:
        if entry.is_dir:
            yield from _notes(store, entry.loc)
        else:
            yield entry.loc
