"""Crash-safe file writes: a temporary file beside the target, fsync, then rename.

`durable=False` keeps the rename (readers still see the old file or the new one, never a part)
but skips the syncs: for records whose loss in a power cut costs nothing a user wrote, such as
a memory run's child bundle, on the hot path of every turn.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace path with data so that readers see the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_dir(path.parent)


def write_json_atomic(path: Path, obj: Any, *, durable: bool = True) -> None:
    """Write obj as indented UTF-8 JSON, atomically."""
    data = json.dumps(obj, ensure_ascii=False, indent=2).encode("utf-8") + b"\n"
    write_atomic(path, data, durable=durable)


def _fsync_dir(folder: Path) -> None:
    # The rename is durable only once the directory entry itself reaches the disk.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
