"""The workspace paths a note cites, and which of them are gone.

A cited path is a backticked token, a Markdown link target, or a bare token holding `/` (a
backticked one may instead end in a common file suffix); never one holding `://` or `..`.
Each is probed with `lstat`, one component at a time, inside the session's cwd only: a path
that leaves it (absolute, or through a symlink) is never probed, and never flagged.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

MAX_CITES = 50  # paths checked per note
_BACKTICKED = re.compile(r"`([^`\s]+)`")
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_BARE = re.compile(r"(?<![\w:/.`\]])((?:\.?/)?[\w@+-][\w.@+-]*(?:/[\w.@+-]+)+/?"
                   r"|[\w@+-][\w.@+-]*/)(?![\w/`])")
_SUFFIX = re.compile(
    r"\.(?:py|pyi|js|mjs|cjs|ts|tsx|jsx|md|txt|json|ya?ml|toml|cfg|ini|rs|go|java|kt|c|h|cc|"
    r"cpp|hpp|cs|rb|php|sh|sql|html|css|scss|xml|lock|swift|vue|svelte|proto|gradle|mk)$")
_PATHLIKE = re.compile(r"^[\w.@+/-]+$")


def cited_paths(text: str) -> list[str]:
    """The paths a note cites, in order of first mention, at most MAX_CITES."""
    found: list[str] = []
    for m in _BACKTICKED.finditer(text):
        token = m[1]
        if "/" in token or _SUFFIX.search(token):
            found.append(token)
    found += [_link_target(m[1]) for m in _LINK.finditer(text)]
    stripped = _BACKTICKED.sub(" ", _LINK.sub(" ", text))
    found += [m[1] for m in _BARE.finditer(stripped)]
    wanted: list[str] = []
    for token in found:
        token = token.rstrip(".,;:")
        if ("://" in token or ".." in token or not _PATHLIKE.match(token)
                or not any(ch.isalpha() for ch in token)):  # 2026/03/02 is a date
            continue
        if token not in wanted:
            wanted.append(token)
            if len(wanted) == MAX_CITES:
                break
    return wanted


def _link_target(target: str) -> str:
    # An anchor or a query names a place in the file; a bare anchor is no path.
    return target.split("#", 1)[0].split("?", 1)[0]


def missing_paths(text: str, cwd: Path, real_cwd: str | None = None) -> list[str]:
    """The cited paths that are not in the workspace at cwd (whose real path is real_cwd,
    when the caller resolved it once for many notes)."""
    base = real_cwd or os.path.realpath(cwd)
    return [token for token in cited_paths(text) if exists_inside(token, base) is False]


def exists_inside(token: str, base: str) -> bool | None:
    """Whether token names an entry inside the real folder base: None when finding out would
    mean probing outside it."""
    if token.startswith("/"):
        if not _within(os.path.normpath(token), base):
            return None
        token = os.path.relpath(os.path.normpath(token), base)
    here = base
    parts = [p for p in token.split("/") if p not in ("", ".")]
    for i, part in enumerate(parts):
        here = os.path.join(here, part)
        try:
            st = os.lstat(here)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode) and i < len(parts) - 1:
            # Followed only while it stays inside: read the link, never what it points to.
            target = os.path.normpath(os.path.join(os.path.dirname(here), os.readlink(here)))
            if not _within(target, base):
                return None
            here = target
    return True


def _within(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")
