"""A git repository for the tests of the shared project root, whose key is its origin remote:
made with `git init` and `git remote add` (no network)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_repo(folder: Path, origin: str | None) -> Path:
    """folder (made when missing) as a git repository with that origin (None: no remote)."""
    folder.mkdir(parents=True, exist_ok=True)
    commands = [["init", "-q"]] + ([["remote", "add", "origin", origin]] if origin else [])
    for args in commands:
        subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True, timeout=30)
    return folder
