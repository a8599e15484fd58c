"""Crash-safe file writes: a temporary file beside the target, fsync, then rename."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: Path, data: bytes) -> None:
    """Replace path with data so that readers see the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write obj as indented UTF-8 JSON, atomically."""
    write_atomic(path, json.dumps(obj, ensure_ascii=False, indent=2).encode("utf-8") + b"\n")


def _fsync_dir(folder: Path) -> None:
    # The rename is durable only once the directory entry itself reaches the disk.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
