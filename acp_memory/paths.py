"""Path checks: does a path, once symlinks are followed, stay under a root; is a session's
workspace a folder."""

from __future__ import annotations

import os
from pathlib import Path

import anyio


class NotAWorkspace(ValueError):
    """A session's cwd that is not an absolute path to an existing folder; says why."""


def resolves_inside(path: str | os.PathLike[str], real_root: Path) -> bool:
    """True when the real location of path is real_root or below it (real_root is resolved).

    A path that cannot be resolved at all (a symlink loop, an embedded NUL) counts as outside.
    """
    try:
        real = Path(path).resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    return real == real_root or real_root in real.parents


async def check_workspace(cwd: str) -> str:
    """`cwd` when it is an absolute path to an existing folder, else NotAWorkspace."""
    if not Path(cwd).is_absolute():
        raise NotAWorkspace(f"must be an absolute path, got {cwd!r}")
    if not await anyio.Path(cwd).is_dir():
        raise NotAWorkspace(f"no such folder: {cwd}")
    return cwd
