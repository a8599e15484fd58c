"""`acp-memory notes list/search/show/edit/rm`: the notes from a terminal, with the tools' rules."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_memory.config import Config, Paths

if TYPE_CHECKING:  # the store pulls in SQLite and the stemmers: load it only to run `notes`
    from acp_memory.memory.store import MemoryStore


def add_notes_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register `notes` and its actions; `parents` carry the shared flags."""
    p = sub.add_parser("notes", parents=parents, help="browse and edit the notes")
    actions = p.add_subparsers(dest="notes_action", metavar="ACTION")
    ls = actions.add_parser("list", parents=parents, help="list a folder (both roots by default)")
    ls.add_argument("path", nargs="?", help="scope:folder, e.g. global: or project:notes")
    se = actions.add_parser("search", parents=parents, help="ranked search")
    se.add_argument("query", help="the query; '-' reads one query per line from stdin")
    se.add_argument("--scope", choices=["global", "project", "both"], default="both")
    se.add_argument("--limit", type=int, default=None, help="hits (default memory.max_search_hits)")
    se.add_argument("--json", action="store_true", help="print JSON {path,score,snippet}")
    for name, help_ in (("show", "print a note"), ("edit", "edit a note in $EDITOR"),
                        ("rm", "delete a note or a folder")):
        actions.add_parser(name, parents=parents, help=help_).add_argument("path")


def run_notes(args: argparse.Namespace, cfg: Config, paths: Paths) -> int:
    """Run one notes action; refusals print on stderr and exit 1."""
    from acp_memory.memory.store import MemoryStore, NoteError

    store = MemoryStore.from_config(cfg, paths)
    action = getattr(args, "notes_action", None) or "list"
    try:
        if action == "list":
            return _list(store, getattr(args, "path", None))
        if action == "search":
            return _search(store, args, cfg.memory.max_search_hits)
        if action == "show":
            sys.stdout.write(store.read(args.path)[1])
            return 0
        if action == "edit":
            return _edit(store, args.path)
        if action == "rm":
            result = store.delete(args.path)
            print(f"deleted {result.path}"
                  + (f" ({result.notes_removed} notes)" if result.was_folder else ""))
            return 0
    except NoteError as exc:
        print(f"acp-memory notes: {exc}", file=sys.stderr)
        return 1
    print(f"acp-memory notes: unknown action {action!r}", file=sys.stderr)
    return 2


def _list(store: MemoryStore, path: str | None) -> int:
    from acp_memory.memory.tools import format_listing

    targets = [path] if path else [f"{s}:" for s in store.roots.scopes()]
    for i, target in enumerate(targets):
        loc, entries = store.list_dir(target)
        print(("\n" if i else "") + format_listing(loc.display, entries))
    return 0


def _search(store: MemoryStore, args: argparse.Namespace, default_limit: int) -> int:
    from acp_memory.memory.tools import format_hits

    limit = args.limit if args.limit is not None else default_limit
    if args.query != "-":
        hits = store.search(args.query, args.scope, limit)
        if args.json:
            print(json.dumps([h.as_json() for h in hits], ensure_ascii=False))
        else:
            where = "global and project" if args.scope == "both" else args.scope
            print(format_hits(args.query, hits, where))
        return 0
    # Batch mode for scripts and evaluations: one JSON array per input line, in order.
    for line in sys.stdin:
        query = line.rstrip("\n")
        hits = store.search(query, args.scope, limit) if query.strip() else []
        print(json.dumps([h.as_json() for h in hits], ensure_ascii=False), flush=True)
    return 0


def _edit(store: MemoryStore, path: str) -> int:
    from acp_memory.memory.store import NoteError
    from acp_memory.memory.tools import format_save

    loc = store.note_location(path)  # refuse a bad path before anyone types anything
    try:
        original = store.read(path)[1]
    except NoteError:
        if loc.path.exists():
            raise
        original = ""  # a new note
    # The editor works on a copy outside the roots; the result goes through store.write,
    # so redaction, the size limit, the lock and the atomic rename all apply.
    fd, tmp = tempfile.mkstemp(prefix="acp-memory-", suffix=loc.path.suffix or ".md")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(original)
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    if subprocess.call([*shlex.split(editor), tmp]) != 0:
        print(f"acp-memory notes: the editor failed; your text is kept in {tmp}", file=sys.stderr)
        return 1
    edited = Path(tmp).read_text(encoding="utf-8")
    if edited == original:
        os.unlink(tmp)
        print(f"{loc.display}: no changes")
        return 0
    try:
        result = store.write(path, edited, if_unchanged=original)
    except NoteError as exc:
        print(f"acp-memory notes: {exc}\nyour text is kept in {tmp}", file=sys.stderr)
        return 1
    os.unlink(tmp)
    print(format_save(result))
    return 0
