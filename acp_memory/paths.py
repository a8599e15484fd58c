"""Containment: does a path, once symlinks are followed, stay under a root?"""

from __future__ import annotations

import os
from pathlib import Path


def resolves_inside(path: str | os.PathLike[str], real_root: Path) -> bool:
    """True when the real location of path is real_root or below it (real_root is resolved).

    A path that cannot be resolved at all (a symlink loop, an embedded NUL) counts as outside.
    """
    try:
        real = Path(path).resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    return real == real_root or real_root in real.parents
