"""Running `acp-memory notes …` in process, as a person at a terminal or a script would."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from acp_memory.cli import main

Run = Callable[..., tuple[int, str, str]]


class Terminal(io.StringIO):
    """Stdin as a person at a terminal would give it."""

    def isatty(self) -> bool:
        return True


def notes_runner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    """`run(*argv, stdin=...)` -> (exit code, stdout, stderr) of `notes *argv` with the home
    `tmp_path/h` and the cwd `tmp_path/w`."""
    (tmp_path / "w").mkdir(exist_ok=True)

    def runner(*argv: str, stdin: str | io.StringIO = "") -> tuple[int, str, str]:
        old = sys.stdin
        sys.stdin = io.StringIO(stdin) if isinstance(stdin, str) else stdin
        try:
            code = main(["notes", *argv, "--home", str(tmp_path / "h"), "--cwd",
                         str(tmp_path / "w"), "--log-level", "warning"])
        finally:
            sys.stdin = old
        out, err = capsys.readouterr()
        return code, out, err

    return runner
