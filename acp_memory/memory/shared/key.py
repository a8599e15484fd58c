"""The project key a shared root is filed under: `memory.shared.project`, else the git remote
`origin` of the repository holding the cwd, normalised so that every clone of one repository
(ssh or https, with or without a user, a port or `.git`) gets the same key."""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path
from typing import Protocol

# `git remote get-url` reads a config file: a second is plenty, the bound only stops a hang
# (a repository on a dead network mount).
GIT_TIMEOUT_S = 5.0
# `user@host:path` (scp form): no scheme, and the colon comes before any slash.
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>.*)$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def normalise_remote(url: str) -> str:
    """A remote's key: scheme, user, password, port and a trailing `.git` dropped, the scp
    form's `host:path` as `host/path`, all lower-cased (`git@github.com:Org/Repo.git` and
    `https://x@github.com/Org/Repo` are both `github.com/org/repo`)."""
    text = url.strip()
    if _SCHEME.match(text):
        rest = _SCHEME.sub("", text, count=1)
        authority, _, path = rest.partition("/")
        host = authority.rpartition("@")[2]
        if host.startswith("["):  # an IPv6 literal keeps its colons
            host = host[: host.find("]") + 1]
        else:
            host = host.partition(":")[0]
    elif match := _SCP.match(text):
        host, path = match["host"], match["path"]
    else:  # a local path or a bare name: kept as it is written
        host, path = "", text
    path = path.split("?", 1)[0].split("#", 1)[0].strip("/")
    if path.lower().endswith(".git"):
        path = path[: -len(".git")].rstrip("/")
    return "/".join(part for part in (host, path) if part).lower()


def project_key(configured: str, cwd: Path) -> tuple[str | None, str]:
    """(key, "") or (None, why): `memory.shared.project` when set (normalised when it looks
    like a remote, else lower-cased), else the `git remote get-url origin` of the repository
    holding cwd (a subfolder gets its repository's key), normalised."""
    return _project_key(configured.strip(), str(Path(cwd).absolute()))


@functools.cache
def _project_key(configured: str, cwd: str) -> tuple[str | None, str]:
    # Cached per (configured, cwd): every session in a cwd asks, and a remote rarely moves.
    if configured:
        looks_like_remote = _SCHEME.match(configured) or "@" in configured or (
            configured.endswith(".git"))
        key = normalise_remote(configured) if looks_like_remote else configured.lower()
        return (key, "") if key else (None, "memory.shared.project is empty")
    try:
        done = subprocess.run(
            ["git", "-C", cwd, "remote", "get-url", "origin"],
            capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False,
        )
    except FileNotFoundError:
        return None, "git is not installed and memory.shared.project is not set"
    except subprocess.TimeoutExpired:
        return None, f"`git remote get-url origin` in {cwd} took over {GIT_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return None, f"cannot run git in {cwd}: {exc.strerror or exc}"
    if done.returncode != 0:
        said = " ".join(done.stderr.split()) or f"git exited with {done.returncode}"
        if "not a git repository" in said:
            why = f"{cwd} is not in a git repository"
        elif "no such remote" in said.lower():
            why = f"the git repository holding {cwd} has no remote origin"
        else:
            why = f"`git remote get-url origin` in {cwd} failed: {said}"
        return None, f"{why}; set memory.shared.project to share its notes"
    key = normalise_remote(done.stdout)
    if not key:
        return None, f"the git remote origin of {cwd} is empty; set memory.shared.project"
    return key, ""


def unshared_line(configured: str, cwd: Path, project_root: Path | None) -> str:
    """The one line saying why shared memory is on but the project notes of cwd stay on disk
    (cwd has no key)."""
    _, why = project_key(configured, cwd)
    return (f"shared project memory is off for {cwd}: {why}; its project notes stay in "
            f"{project_root}")


class _SharedRoots(Protocol):
    @property
    def shared_key(self) -> str | None: ...
    @property
    def project_root(self) -> Path | None: ...


def shared_key_of(roots: _SharedRoots, scope: str, root: str | Path | None = None) -> str | None:
    """The key when `scope` names a shared project root (and `root`, a change's root folder
    when given, is that root: a change of the project's notes kept on disk is not shared)."""
    if scope != "project" or not roots.shared_key:
        return None
    if root is not None and Path(root) != roots.project_root:
        return None
    return roots.shared_key


def shared_label(text: str, key: str | None) -> str:
    """A root (or a folder of it) as people read it: `project (shared: <key>)` when shared."""
    return f"{text} (shared: {key})" if key else text


def shared_json(key: str | None) -> dict[str, str]:
    """What JSON naming a root adds for a shared one: `{"shared": key}`; {} for the others."""
    return {"shared": key} if key else {}
