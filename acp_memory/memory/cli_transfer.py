"""`acp-memory notes import` and `notes export`: a folder of note files copied into a root, and a
root's notes written out as files (`shared/transfer.py` does the copying; here the lines a
person reads, a shared root's key, and its server gone offline)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from acp_memory.memory.cli_changes import count_notes, fail
from acp_memory.memory.shared.key import shared_key_of, shared_label

if TYPE_CHECKING:  # the store pulls in SQLite and the stemmers: load it only to run `notes`
    from acp_memory.config import Config, Paths
    from acp_memory.memory.roots import Location
    from acp_memory.memory.store import MemoryStore


def run_import(store: MemoryStore, args: argparse.Namespace, cfg: Config, paths: Paths) -> int:
    """Copy DIR's notes into the target folder; a refused note is one line, the rest goes on."""
    from acp_memory.memory.shared.transfer import TransferStopped, import_notes

    source = Path(args.dir).expanduser().absolute() if args.dir else paths.cwd / "memory"
    if not source.is_dir():
        return fail(f"{source}: no such folder")
    into = store.locate(args.target)
    offline = _offline(cfg, shared_key_of(store.roots, into.scope))
    try:
        done = import_notes(store, args.target, source, offline)
    except TransferStopped as exc:
        return fail(f"{exc}; writes refused, the import stopped (a note already imported "
                    "stays; `notes import` again goes on)")
    for path, why in done.refused:
        fail(f"{path} not imported: {why}")
    print(f"imported {count_notes(done.copied)} into {_root_label(store, into)}: "
          f"{done.counts('updated')}")
    return 1 if done.refused else 0


def run_export(store: MemoryStore, args: argparse.Namespace, cfg: Config) -> int:
    """Write the source folder's notes out as files under DIR."""
    from acp_memory.memory.shared.transfer import export_notes

    dest = Path(args.dir).expanduser().absolute()
    start = store.locate(args.source)
    done = export_notes(store, args.source, dest)
    for path, why in done.refused:
        fail(f"{path} not exported: {why}")
    if (offline := _offline(cfg, shared_key_of(store.roots, start.scope))()) is not None:
        fail(f"{offline}; exported the local copy")
    print(f"exported {count_notes(done.copied)} from {_root_label(store, start)} to {dest}: "
          f"{done.counts('replaced')}")
    return 1 if done.refused else 0




def _root_label(store: MemoryStore, loc: Location) -> str:
    """`project (shared: <key>)`, `global`, or a folder's `scope:folder/`, as people read it."""
    text = loc.scope if loc.is_root else f"{loc.display}/"
    return shared_label(text, shared_key_of(store.roots, loc.scope))


def _offline(cfg: Config, key: str | None) -> Callable[[], str | None]:
    """What says, after a refused write, that the shared server went away (None: it did not)."""
    if key is None or not cfg.memory.shared.dsn:
        return lambda: None
    from acp_memory.memory.shared.database import database_for

    database = database_for(cfg.memory.shared.dsn)
    return lambda: None if database.online or not database.last_error else database.last_error
