"""An OSError in the words a user reads: the path it concerns and the reason, no traceback."""

from __future__ import annotations

import os


def os_error_text(exc: OSError) -> str:
    """`<path>: <reason>` (both paths of a rename), or the reason alone when it names none."""
    parts = []
    for name in (exc.filename, exc.filename2):
        if name is not None:
            parts.append(os.fsdecode(name) if isinstance(name, str | bytes) else str(name))
    parts.append(exc.strerror or str(exc))
    return ": ".join(parts)


def describe_os_error(what: str, exc: OSError) -> str:
    """`<what>: <path>: <reason>`: an OSError as the one line a user reads."""
    return f"{what}: {os_error_text(exc)}"
