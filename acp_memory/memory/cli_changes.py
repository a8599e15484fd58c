"""The `notes` actions that change notes or their history: `edit`, `write`, `rm` and `purge`
(each change prints the `notes undo` that takes it back), and the lines every `notes` action
shares with them: a refusal on stderr, a count of notes."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store pulls in SQLite and the stemmers: load it only to run `notes`
    from acp_memory.memory.store import MemoryStore


def fail(line: str, code: int = 1) -> int:
    print(f"acp-memory notes: {line}", file=sys.stderr)
    return code


def count_notes(count: int) -> str:
    return f"{count} note" if count == 1 else f"{count} notes"


def edit(store: MemoryStore, path: str) -> int:
    from acp_memory.memory.store import NoteError
    from acp_memory.memory.tools import format_save

    loc = store.note_location(path)  # refuse a bad path before anyone types anything
    try:
        original = store.read(path)[1]
    except NoteError:
        if loc.path.exists():
            raise
        original = ""  # a new note
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        command = shlex.split(editor)
    except ValueError as exc:
        return fail(f"cannot run the editor {editor!r}: {exc}")
    if not command:
        return fail("the editor command ($VISUAL or $EDITOR) is empty")
    # The editor works on a copy in the temporary folder; the result goes through
    # store.write, so redaction, the size limit, the lock and the atomic rename all apply.
    fd, tmp = tempfile.mkstemp(prefix="acp-memory-", suffix=loc.path.suffix or ".md")
    keep = False  # the copy stays only when it holds text the user would otherwise lose
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(original)
        try:
            status = subprocess.call([*command, tmp])
        except OSError as exc:
            return fail(f"cannot run the editor {editor!r} ($VISUAL or $EDITOR): "
                        f"{exc.strerror or exc}")
        edited = Path(tmp).read_text(encoding="utf-8")
        if status != 0:
            keep = edited != original
            kept = f"; your text is kept in {tmp}" if keep else ""
            return fail(f"the editor {editor!r} exited with status {status}{kept}")
        if edited == original:
            print(f"{loc.display}: no changes")
            return 0
        try:
            result = store.write(path, edited, if_unchanged=original)
        except NoteError as exc:
            keep = True
            return fail(f"{exc}; your text is kept in {tmp}")
        print(format_save(result))
        return 0
    finally:
        if not keep:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def rm(store: MemoryStore, args: argparse.Namespace) -> int:
    from acp_memory.memory.store import NoteError

    plan = store.plan_delete(args.path)
    if plan.was_folder:
        if not args.recursive:
            raise NoteError(f"{plan.path} is a folder; use rm -r to delete it and its "
                            f"{count_notes(plan.notes_removed)}")
        if not args.yes:
            if sys.stdin is None or not sys.stdin.isatty():
                raise NoteError(f"{plan.path} is a folder with {count_notes(plan.notes_removed)} "
                                "and stdin is not a terminal to ask on; add -y to delete it")
            print(f"delete {plan.path} and the {count_notes(plan.notes_removed)} under it? "
                  "[y/N] ", end="", file=sys.stderr, flush=True)
            if sys.stdin.readline().strip().lower() not in ("y", "yes"):
                print("nothing was deleted", file=sys.stderr)
                return 1
    result = store.delete(args.path, folders=plan.was_folder)
    print(f"deleted {result.path}"
          + (f" ({count_notes(result.notes_removed)})" if result.was_folder else ""))
    _print_undo(result.change_id)
    return 0


def _print_undo(change_id: str | None) -> None:
    """The way back from a change just made (none when no history is kept)."""
    if change_id:
        print(f"undo: acp-memory notes undo {change_id}")


def write(store: MemoryStore, path: str) -> int:
    from acp_memory.memory.store import NoteError
    from acp_memory.memory.tools import format_save

    store.note_location(path)  # a bad path is refused before stdin is read
    if sys.stdin is None or sys.stdin.isatty():
        raise NoteError(f"notes write reads the text of {path} from stdin, which is a "
                        "terminal; pipe it in, or use notes edit")
    result = store.write(path, sys.stdin.read())
    print(format_save(result))
    _print_undo(result.change_id)
    return 0


def purge(store: MemoryStore, args: argparse.Namespace) -> int:
    from acp_memory.memory.history.summary import counted
    from acp_memory.memory.history.undo import journal_of
    from acp_memory.memory.store import NoteError

    loc = store.locate(args.path)
    journal = journal_of(store)
    # A shared path's history is the whole team's: every agent on the repository loses it.
    key = store.roots.shared_key if loc.scope == "project" else None
    what = (f"the whole team's history of {loc.display} (shared: {key})" if key
            else f"the whole history of {loc.display}") + (
        "" if loc.is_note_path else " and of everything under it")
    if not args.yes:
        if sys.stdin is None or not sys.stdin.isatty():
            raise NoteError(f"stdin is not a terminal to ask on; add -y to purge {what}")
        print(f"drop {what} from the memory history? It cannot be undone. [y/N] ", end="",
              file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            print("nothing was purged", file=sys.stderr)
            return 1
    with store.locked(loc, "purge the history of"):  # a dead writer's change settled first
        count, purge_id = journal.purge((loc.scope, loc.root, loc.rel), store.source)
    if purge_id is None:
        print(f"no changes of {loc.display} in the memory history: nothing was purged")
    else:
        print(f"purged {loc.display} from the memory history ({counted(count, 'change')}); "
              f"the purge is {purge_id}")
    return 0
