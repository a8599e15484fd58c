"""`acp-memory notes ...`: placeholder until the memory store lands."""

from __future__ import annotations

import argparse
from typing import Any

from acp_memory.config import Config, Paths


def add_notes_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("notes", parents=parents, help="browse and edit the notes")
    p.add_argument("action", nargs="?", default="list")
    p.add_argument("rest", nargs="*")


def run_notes(args: argparse.Namespace, cfg: Config, paths: Paths) -> int:
    raise SystemExit("acp-memory notes: not implemented yet")
