"""`acp-memory notes log/undo/pending/approve/reject`: the history of every note change, its
undo, and the changes held for approval, from a terminal."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the journal is SQLite: load it only to run one of these actions
    from acp_memory.memory.history.records import Change, Held
    from acp_memory.memory.history.service import History
    from acp_memory.memory.store import MemoryStore

LOG_LIMIT = 20
HISTORY_ACTIONS = {
    "log": (
        "the history of the notes, newest first",
        "Every change of the global root and of this working directory's project root, "
        "newest first: its id, time, action, path, a one-line summary and where it came "
        "from (the surface, and the session, task and message of a memory run). A path "
        "(scope:path, e.g. global:prefs.md, or a folder such as project:api) keeps the "
        "changes of that note or folder, of what is under it and of the folders holding it. "
        "With --cost, what the memory runs cost instead, summed per day.",
    ),
    "undo": (
        "undo one change",
        "Put the path a change touched back as it was before it (a deleted note or folder "
        "comes back), asking first on a terminal. Refused when the path was changed again "
        "since or edited by hand, unless --force, and when the change was undone already. "
        "The undo is itself a change in the log.",
    ),
    "pending": (
        "the changes held for approval",
        "The changes the agent proposed while no one could be asked (memory.review: ask), "
        "oldest first; they expire after memory.pending_days.",
    ),
    "approve": (
        "make a held change",
        "Make a held change (or all of them) as it was proposed; refused when the note "
        "changed since it was held.",
    ),
    "reject": ("drop a held change", "Drop a held change (or all of them): nothing is written."),
}


def add_history_parsers(action: Callable[[str], argparse.ArgumentParser]) -> None:
    """The arguments of the history actions; `action(name)` makes the named sub-parser."""
    log = action("log")
    log.add_argument("path", nargs="?",
                     help="a note or folder as scope:path, e.g. global:prefs.md or project:api")
    log.add_argument("--limit", type=int, default=LOG_LIMIT, metavar="N",
                     help=f"at most N changes, or N days with --cost (default {LOG_LIMIT}; "
                          "0 for all)")
    log.add_argument("--json", action="store_true",
                     help="print a JSON list of {id, time, root, path, action, source, "
                          "summary}")
    log.add_argument("--cost", action="store_true",
                     help="the memory runs' model calls, tokens and time, summed per day")
    undo = action("undo")
    undo.add_argument("change_id", metavar="CHANGE_ID", help="the change, chg_… (see notes log)")
    undo.add_argument("-y", "--yes", action="store_true", help="do not ask first")
    undo.add_argument("--force", action="store_true",
                      help="undo even when the path was changed again since or edited by hand")
    action("pending").add_argument("--json", action="store_true",
                                   help="print a JSON list of {id, time, root, path, action, "
                                        "source, summary}")
    for name in ("approve", "reject"):
        action(name).add_argument("pending_id", metavar="ID",
                                  help="a held change, pnd_… (see notes pending), or all")


FORCE_HINT = "notes undo --force undoes anyway"


def run_history(store: MemoryStore, args: argparse.Namespace) -> int:
    """Run one history action; a refusal is a NoteError (one line, exit 1)."""
    from acp_memory.memory.history.journal import JournalError
    from acp_memory.memory.history.service import History
    from acp_memory.memory.store import NoteError

    history = History.of_every_root(store, FORCE_HINT)  # no session: every root is ours
    try:
        if args.notes_action == "log":
            return _log(store, history, args)
        if args.notes_action == "undo":
            return _undo(history, args)
        if args.notes_action == "pending":
            return _pending(store, history, args)
        return _decide(history, args)
    except JournalError as exc:
        raise NoteError(str(exc)) from None


def _json(store: MemoryStore, change: Change | Held, history: History) -> dict[str, Any]:
    """A change as `--json` prints it: a shared project root's adds its key."""
    from acp_memory.memory.history.summary import change_json
    from acp_memory.memory.shared.key import shared_key_of

    return change_json(change, history.journal, change.scope,
                       shared_key_of(store.roots, change.scope, change.root))


def _log(store: MemoryStore, history: History, args: argparse.Namespace) -> int:
    from acp_memory.memory.history.summary import change_line
    from acp_memory.memory.shared.key import shared_key_of, shared_label

    if args.limit < 0:
        return _usage("--limit must be 0 (all) or more")
    if args.cost:
        if args.path:
            return _usage("--cost sums every memory run; it takes no path")
        return _costs(history.journal.costs_per_day(args.limit), args.json)
    if args.path:
        loc = store.locate(args.path)
        changes = history.changes([loc.root], loc.rel or None, args.limit)
    else:
        changes = history.changes(limit=args.limit)
    if args.json:
        print(json.dumps([_json(store, c, history) for c in changes], ensure_ascii=False))
    elif not changes:
        where = args.path or " or ".join(shared_label(scope, shared_key_of(store.roots, scope))
                                         for scope in store.roots.scopes())
        print(f"no changes of {where} in the memory history")
    else:
        for change in changes:
            print(change_line(change, history.journal))
    return 0


def _costs(days: list[dict[str, Any]], as_json: bool) -> int:
    from acp_memory.memory.history.summary import counted
    from acp_memory.tasks.records import format_seconds

    if as_json:
        print(json.dumps(days))
        return 0
    if not days:
        print("no memory run has recorded its cost yet")
    for day in days:
        print(f"{day['day']}: {counted(day['runs'], 'memory run')}, "
              f"{counted(day['modelCalls'], 'model call')}, {day['inputTokens']} tokens in, "
              f"{day['outputTokens']} out, {day['cachedReadTokens']} cached read, "
              f"{day['cachedWriteTokens']} cached write, "
              f"{format_seconds(day['durationMs'] / 1000)}")
    return 0


def _undo(history: History, args: argparse.Namespace) -> int:
    from acp_memory.memory.history.summary import change_line, undone_line
    from acp_memory.memory.history.undo import shown
    from acp_memory.memory.store import NoteError

    change = history.change(args.change_id)
    if not args.yes:
        if sys.stdin is None or not sys.stdin.isatty():
            raise NoteError(f"stdin is not a terminal to ask on; add -y to undo {change.id}")
        print(f"{change_line(change, history.journal)}\nput {shown(change)} back as it was "
              "before this change? [y/N] ", end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            print("nothing was undone", file=sys.stderr)
            return 1
    print(undone_line(history.undo(change.id, force=args.force)))
    return 0


def _pending(store: MemoryStore, history: History, args: argparse.Namespace) -> int:
    from acp_memory.memory.history.summary import change_line

    held = history.held()
    if args.json:
        print(json.dumps([_json(store, h, history) for h in held], ensure_ascii=False))
    elif not held:
        print("no changes are waiting for approval")
    else:
        for one in held:
            print(change_line(one, history.journal))
        print("approve with `notes approve ID|all`, drop with `notes reject ID|all`")
    return 0


def _decide(history: History, args: argparse.Namespace) -> int:
    """approve or reject one held change, or all: each that is refused is one line on stderr."""
    approving = args.notes_action == "approve"
    decisions = history.decide(approving, args.pending_id)
    if not decisions:
        print("no changes are waiting for approval")
        return 0
    for d in decisions:
        if d.refused:
            print(f"acp-memory notes: {d.refused}", file=sys.stderr)
        else:
            print(f"{'approved' if approving else 'rejected'} {d.held.id}: "
                  f"{d.held.action} {d.held.scope}:{d.held.path}")
    return 1 if any(d.refused for d in decisions) else 0


def _usage(line: str) -> int:
    print(f"acp-memory notes: {line}", file=sys.stderr)
    return 2
