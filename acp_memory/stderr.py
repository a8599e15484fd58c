"""The one line a command says on stderr, prefixed with the program's name."""

from __future__ import annotations

import sys


def error(line: str) -> None:
    """One line on stderr, prefixed with the program's name."""
    print(f"acp-memory: {line}", file=sys.stderr, flush=True)
