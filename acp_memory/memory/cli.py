"""`acp-memory notes list/search/index/show/edit/write/rm/purge`: the notes from a terminal,
with the tools' rules. Here the parser, the dispatch and the actions that read; the ones that
change notes (edit, write, rm, purge) are in `cli_changes.py`, import and export in
`cli_transfer.py`, the history's in `history_cli.py`."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from acp_memory.memory.cli_changes import count_notes, edit, fail, purge, rm, write
from acp_memory.memory.cli_transfer import run_export, run_import
from acp_memory.memory.history_cli import HISTORY_ACTIONS, add_history_parsers, run_history
from acp_memory.memory.shared.key import shared_json, shared_key_of, shared_label, unshared_line

if TYPE_CHECKING:  # the store pulls in SQLite and the stemmers: load it only to run `notes`
    from acp_memory.config import Config, Paths
    from acp_memory.memory.search import Hits
    from acp_memory.memory.store import MemoryStore

NOTES_DESCRIPTION = (
    "Browse, search and edit the long-term notes the agent keeps: the global notes in "
    "<home>/memory (or memory.dir) and the project notes in <cwd>/memory. A path is "
    "scope:relative/path with scope global or project (or workspace, as HTTP calls it), e.g. "
    "global:prefs.md or project:api/auth.md; `global:` alone is the root. Writes follow the "
    "agent's rules: secrets are redacted, the size limit holds, and a save is atomic. Every "
    "change, the agent's and yours, is kept in a history under the home: `notes log` shows "
    "it and `notes undo` takes a change back."
)
INTERRUPTED = 130  # the status a shell expects after Ctrl-C
_ALL = 1 << 62  # every pending note, for the counts (SQLite's LIMIT wants a number)
_PATH_FORM = "scope:path, e.g. global:prefs.md or project:api/auth.md"
_ACTIONS = {
    "list": (
        "list a folder (both roots by default)",
        "List one folder of notes, one level: subfolders, then notes with their size and "
        "modification time. Without a path, both roots.",
    ),
    "search": (
        "ranked search",
        "Search the notes by relevance of path and body, in any language; notes holding an "
        "exact identifier of the query come first, then notes holding every word. With "
        "memory.embeddings on, by meaning as well: only the query is embedded, and notes "
        "that `notes index` (or the agent) has not embedded yet are found by their words.",
    ),
    "index": (
        "build or bring up to date the search index",
        "Build the search index of both roots, or bring it up to date with the files, then "
        "exit; with memory.embeddings on, every note lacking a vector gets one too. A "
        "terminal shows a progress bar; each root ends with one line: notes indexed, notes "
        "embedded, time taken. Searches build what they lack themselves; this does it ahead.",
    ),
    "show": ("print a note", "Print the whole text of one note."),
    "edit": (
        "edit a note in $EDITOR",
        "Open a copy of a note (a new one if it does not exist) in $VISUAL or $EDITOR (else "
        "vi); the result is saved through the same rules as the agent's saves, and never over "
        "a change someone made while the editor was open.",
    ),
    "write": (
        "write a note from stdin",
        "Write a note (created or replaced) with the text read from stdin, through the same "
        "rules as the agent's saves: secrets redacted, the size limit, an atomic write, a "
        "change in the history. An empty text, or stdin on a terminal, is refused.",
    ),
    "rm": (
        "delete a note, or a folder with -r",
        "Delete a note, or with -r a folder and every note under it (asking first on a "
        "terminal). A root is never deleted. It prints the `notes undo` that brings it back.",
    ),
    "purge": (
        "drop a path's whole history",
        "Drop every change of a note, or of a folder and everything under it, from the "
        "memory history, contents included (the notes themselves stay as they are), asking "
        "first on a terminal; without one, -y is needed. The purge is itself a line of "
        "`notes log`, without content, and cannot be undone.",
    ),
    "stale": (
        "list notes whose cited paths are gone or that no recall has read lately",
        "List the notes of both roots that cite a path gone from the working directory "
        "(--cwd), or that no memory run has read in --days days (a note never read counts "
        "from its file time); nothing is deleted. Each line is scope:path and why. With "
        "--json, a list of {root, path, reasons: [...], lastRead, changed, missing: [...]}: "
        "root is global or project, path is relative to it, lastRead (null when never read) "
        "and changed (the file time) are ISO 8601 UTC, missing holds the cited paths that "
        "are gone.",
    ),
    "import": (
        "copy a folder of notes into a root",
        "Copy every note and folder under DIR (default <cwd>/memory) into a folder of a root, "
        "e.g. project: (with memory.shared on, the team's shared project notes) or global:. "
        "Each note is saved through the same rules as the agent's saves (secrets redacted, "
        "the size limit, a change in the history); a note already holding the same text is "
        "left alone, a refused one is listed and the rest goes on; nothing is deleted.",
    ),
    "export": (
        "write a root's notes out as files",
        "Write every note under a folder of a root (project: or global:, or a folder of "
        "either) as files under DIR, folders included; a file already holding the same text "
        "is left alone, nothing is deleted. With memory.shared on, project: is the team's "
        "shared notes (the local copy when the server cannot be reached).",
    ),
    "tidy": (
        "propose merging duplicates, settling contradictions, dropping stale lines",
        "Run a tidy run over a root (SCOPE: project: or global:, default project:): the "
        "memory model reads the notes that say the same thing, give one subject two values "
        "(the newer wins) or cite paths that are gone, and proposes merges, updates and "
        "deletes, each with a one-line reason. They are held for `notes approve` or `notes "
        "reject` (a merge is one held change over its notes); with --apply they are made at "
        "once, each a change `notes undo` reverses. It calls the memory model. With --json, "
        "{scope, groups, held: [{id, paths, actions, reason}], made: [...], refused, report}.",
    ),
    **HISTORY_ACTIONS,
}


def add_notes_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register `notes` and its actions; `parents` carry the shared flags."""
    p = sub.add_parser("notes", parents=parents, help="browse and edit the notes",
                       description=NOTES_DESCRIPTION)
    actions = p.add_subparsers(dest="notes_action", metavar="ACTION")

    def action(name: str) -> argparse.ArgumentParser:
        help_, description = _ACTIONS[name]
        return actions.add_parser(name, parents=parents, help=help_, description=description)

    action("list").add_argument(
        "path", nargs="?", help="a folder as scope:folder, e.g. global: or project:api"
    )
    se = action("search")
    se.add_argument(
        "query",
        help="words or an identifier; '-' reads queries from stdin, one per line, and answers "
             "each in turn (for scripts)",
    )
    se.add_argument("--scope", choices=["global", "project", "workspace", "both"],
                    default="both",
                    help="which notes to search (default both; workspace is project)")
    se.add_argument("--limit", type=int, default=None, help="hits (default memory.max_search_hits)")
    se.add_argument("--json", action="store_true",
                    help="print a JSON array of {path, score, snippet}, one line per query")
    action("index")
    action("show").add_argument("path", help=f"the note, as {_PATH_FORM}")
    action("edit").add_argument(
        "path", help=f"the note, as {_PATH_FORM}; a missing note is created"
    )
    action("write").add_argument(
        "path", help=f"the note, as {_PATH_FORM}; its text is read from stdin"
    )
    rm = action("rm")
    rm.add_argument("path", help=f"the note or folder, as {_PATH_FORM} or project:api")
    rm.add_argument("-r", "--recursive", action="store_true",
                    help="delete a folder and every note under it")
    rm.add_argument("-y", "--yes", action="store_true", help="do not ask before deleting a folder")
    purge = action("purge")
    purge.add_argument("path", help=f"the note or folder, as {_PATH_FORM} or project:api")
    purge.add_argument("-y", "--yes", action="store_true", help="do not ask first")
    stale = action("stale")
    stale.add_argument("--days", type=int, default=None,
                       help="a note no recall has read in this many days is listed (default 90)")
    stale.add_argument("--json", action="store_true", help="print a JSON list (see above)")
    into = action("import")
    into.add_argument("target", metavar="FOLDER",
                      help="where the notes go, as scope:folder, e.g. project: or global:team")
    into.add_argument("dir", metavar="DIR", nargs="?",
                      help="the folder of notes to copy (default <cwd>/memory)")
    out = action("export")
    out.add_argument("source", metavar="FOLDER",
                     help="the notes to write out, as scope:folder, e.g. project:")
    out.add_argument("dir", metavar="DIR", help="the folder to write them into")
    tidy = action("tidy")
    tidy.add_argument("scope", metavar="SCOPE", nargs="?", default="project:",
                      help="the root to tidy, project: or global: (default project:)")
    tidy.add_argument("--apply", action="store_true",
                      help="make the proposals at once instead of holding them")
    tidy.add_argument("--json", action="store_true", help="print one JSON object (see above)")
    add_history_parsers(action)


def run_notes(args: argparse.Namespace, cfg: Config, paths: Paths) -> int:
    """Run one notes action; refusals print one line on stderr and exit 1. A reader of
    stdout that leaves early (`notes list | head -1`) misses the rest, nothing more."""
    from acp_memory.memory.roots import MemoryPathError
    from acp_memory.memory.store import MemoryStore, NoteError
    from acp_memory.stdout import Stdout

    action = getattr(args, "notes_action", None) or "list"
    with MemoryStore.from_config(cfg, paths) as store, contextlib.redirect_stdout(
        Stdout(sys.stdout)
    ):
        roots = store.roots
        if cfg.memory.shared.dsn and roots.shared_key is None and roots.cwd is not None:
            fail(unshared_line(cfg.memory.shared.project, roots.cwd, roots.project_root))
        try:
            if action == "list":
                return _list(store, getattr(args, "path", None))
            if action == "search":
                return _search(store, args, cfg.memory.max_search_hits)
            if action == "index":
                return _index(store)
            if action == "show":
                sys.stdout.write(store.read(args.path)[1])
                return 0
            if action == "edit":
                return edit(store, args.path)
            if action == "write":
                return write(store, args.path)
            if action == "rm":
                return rm(store, args)
            if action == "purge":
                return purge(store, args)
            if action == "stale":
                return _stale(store, args)
            if action == "import":
                return run_import(store, args, cfg, paths)
            if action == "export":
                return run_export(store, args, cfg)
            if action in HISTORY_ACTIONS:
                return run_history(store, args)
        except (NoteError, MemoryPathError) as exc:
            return fail(str(exc))
        except OSError as exc:
            from acp_memory.oserror import describe_os_error

            return fail(describe_os_error(f"cannot {action}", exc))
    return fail(f"unknown action {action!r}", 2)


def _list(store: MemoryStore, path: str | None) -> int:
    from acp_memory.memory.store import NoteError
    from acp_memory.memory.tools import format_listing

    targets = [path] if path else [f"{s}:" for s in store.roots.scopes()]
    for i, target in enumerate(targets):
        loc, entries = store.list_dir(target)
        # A root that does not exist yet is empty; any other missing folder is a wrong path.
        if not loc.is_root and not loc.path.is_dir():
            raise NoteError(f"no such folder {loc.display}")
        listing = format_listing(loc.display, entries)
        if key := shared_key_of(store.roots, loc.scope):  # the head names the root: whose notes
            head, sep, rest = listing.partition(" ")
            listing = f"{shared_label(head, key)}{sep}{rest}"
        print(("\n" if i else "") + listing)
    return 0


def _search(store: MemoryStore, args: argparse.Namespace, default_limit: int) -> int:
    from acp_memory.memory.search import Hits

    limit = args.limit if args.limit is not None else default_limit
    if limit < 1:
        return fail("--limit must be at least 1", 2)
    if args.query != "-":
        _print_hits(store, args, args.query, store.search(args.query, args.scope, limit))
        return 0
    # Batch mode, for scripts and evaluations: each line of stdin is a query, answered in
    # order as soon as it is read (a blank line gets an empty answer).
    for line in sys.stdin:
        query = line.rstrip("\n")
        hits = store.search(query, args.scope, limit) if query.strip() else Hits()
        _print_hits(store, args, query, hits)
    return 0


def _print_hits(store: MemoryStore, args: argparse.Namespace, query: str, hits: Hits) -> None:
    from acp_memory.memory.roots import scope_name
    from acp_memory.memory.tools import format_hits

    if args.json:
        print(json.dumps([{**h.as_json(),
                           **shared_json(shared_key_of(store.roots, h.path.split(":")[0]))}
                          for h in hits], ensure_ascii=False), flush=True)
    else:
        scope = scope_name(args.scope)
        scopes = store.roots.scopes() if scope == "both" else (scope,)
        where = " and ".join(shared_label(s, shared_key_of(store.roots, s)) for s in scopes)
        print(format_hits(query, hits, where), flush=True)


def _index(store: MemoryStore) -> int:
    """Both roots' words, then their missing vectors, one root after the other."""
    unavailable = ""  # the provider failed: the roots after it are not tried again
    try:
        for scope in store.roots.scopes():
            unavailable = _index_root(store, scope, unavailable)
    except KeyboardInterrupt:
        # Every committed batch stays; the next index compares stamps and does the rest.
        return fail("index interrupted; what was indexed so far is kept, and the next "
                    "`notes index` goes on from there", INTERRUPTED)
    return 1 if unavailable else 0


def _index_root(store: MemoryStore, scope: str, unavailable: str) -> str:
    """Bring one root's index up to date and print its line; the embeddings' failure, if any."""
    import anyio

    from acp_memory.llm.embeddings import EmbeddingsUnavailable
    from acp_memory.memory.index.keeper import embed_pending
    from acp_memory.memory.progress import ProgressBar

    root = store.roots.root_of(scope)
    started = time.monotonic()
    if not root.is_dir():
        print(f"{scope} {root}: no notes (the folder does not exist yet)")
        return unavailable
    indexes = store.indexes
    with ProgressBar(f"{scope}: words", sys.stderr) as bar:
        indexes.build(root, bar)
    parts = [f"{count_notes(bar.total)} indexed" if bar.total else "words up to date"]
    if indexes.embeddings is not None:
        missing = len(indexes.pending_vectors(root, _ALL))
        embedded = 0
        if missing and not unavailable:
            with ProgressBar(f"{scope}: vectors", sys.stderr) as bar:
                try:
                    embedded = anyio.run(embed_pending, indexes, root,
                                         lambda done, _: bar(done, missing))
                except EmbeddingsUnavailable as exc:
                    unavailable = str(exc)
                    embedded = missing - len(indexes.pending_vectors(root, _ALL))
        parts.append(f"{embedded} embedded" if missing else "vectors up to date")
        if unavailable and (left := missing - embedded):
            fail(f"{scope}: embeddings unavailable: {unavailable}; {count_notes(left)} "
                 f"{'has' if left == 1 else 'have'} no vector yet (tried again by the next "
                 "`notes index`, and by the agent in the background); searches use words")
    print(f"{scope} {root}: {', '.join(parts)}, in {time.monotonic() - started:.1f} s",
          flush=True)
    return unavailable




def _stale(store: MemoryStore, args: argparse.Namespace) -> int:
    from acp_memory.memory.facts import OLD_DAYS, stale_notes
    days = OLD_DAYS if args.days is None else args.days
    if days < 1:
        return fail("--days must be at least 1", 2)
    found = stale_notes(store, days)
    if args.json:
        print(json.dumps([{**n.as_json(), **shared_json(shared_key_of(store.roots, n.scope))}
                          for n in found], ensure_ascii=False))
        return 0
    if not found:
        print(f"no stale notes: every cited path is in {store.roots.cwd} and every note was "
              f"read by a recall or changed in the last {days} days")
    for n in found:
        print(f"{n.scope}:{n.path}: {'; '.join(n.reasons())}")
    return 0
