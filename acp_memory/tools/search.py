"""Workspace search: glob (files by name pattern) and grep (lines by regular expression).

Both walk the workspace in a worker thread, skip `.git/` and whatever the `.gitignore` files
ignore, never follow a symlinked folder, and bound what they scan and what they return.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from acp_memory.paths import resolves_inside
from acp_memory.tools.base import ToolContext, ToolError, ToolKind, ToolResult
from acp_memory.tools.files import decode_text, reachable, real_path, workspace_roots

if TYPE_CHECKING:
    import pathspec

MAX_GLOB_RESULTS = 500
MAX_SCANNED_FILES = 100_000  # files one call looks at, matched or not
MAX_GREP_FILE_BYTES = 2 * 1024 * 1024
MAX_LINE_CHARS = 400


class Glob:
    name = "glob"
    description = (
        "Find files by name pattern under the working directory (or `path`), sorted. `*` and "
        "`?` stay within one folder, `**` crosses folders, `{a,b}` is either; a pattern without "
        "/ matches the file name at any depth. Skips .git/ and what .gitignore ignores."
    )
    kind: ToolKind = "search"
    read_only = True
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "e.g. **/*.py, src/*.ts, *.{md,txt}"},
            "path": {"type": "string", "description": "folder to search, relative to the cwd"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        where = args.get("path")
        return f"Glob {args.get('pattern', '')}" + (f" in {where}" if where else "")

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
        return [str(real_path(ctx, args.get("path") or "."))]

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        matcher = glob_matcher(args["pattern"])
        shown = args.get("path") or "."
        root, _ = await reachable(ctx, shown, "Search")
        found = await anyio.to_thread.run_sync(
            _glob, ctx, root, shown, matcher, abandon_on_cancel=True
        )
        return ToolResult(found, locations=[str(root)])


class Grep:
    name = "grep"
    description = (
        "Search file contents with a Python regular expression, line by line, under the "
        "working directory (or `path`, a folder or one file). Answers `path:line: text`. "
        "Skips .git/, what .gitignore ignores, and binary files; `glob` narrows the files."
    )
    kind: ToolKind = "search"
    read_only = True
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "a Python regular expression"},
            "path": {"type": "string", "description": "folder or file, relative to the cwd"},
            "glob": {"type": "string", "description": "only files matching, e.g. *.py"},
            "ignore_case": {"type": "boolean", "description": "match regardless of case"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def title(self, args: Mapping[str, Any]) -> str:
        where = args.get("path")
        return f"Grep {args.get('pattern', '')}" + (f" in {where}" if where else "")

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
        return [str(real_path(ctx, args.get("path") or "."))]

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        flags = re.IGNORECASE if args.get("ignore_case") is True else 0
        try:
            regex = re.compile(args["pattern"], flags)
        except re.error as exc:
            raise ToolError(f"pattern is not a valid regular expression: {exc}") from None
        only = glob_matcher(args["glob"]) if args.get("glob") else None
        shown = args.get("path") or "."
        root, _ = await reachable(ctx, shown, "Search")
        found = await anyio.to_thread.run_sync(
            _grep, ctx, root, shown, regex, only, abandon_on_cancel=True
        )
        return ToolResult(found, locations=[str(root)])


# -- glob patterns -------------------------------------------------------------------------


@dataclass(frozen=True)
class GlobMatcher:
    regex: re.Pattern[str]
    by_name: bool  # no / in the pattern: it is matched against the file name alone

    def matches(self, rel: str) -> bool:
        return self.regex.fullmatch(rel.rsplit("/", 1)[-1] if self.by_name else rel) is not None


def glob_matcher(pattern: str) -> GlobMatcher:
    text = pattern.strip()
    while text.startswith("./"):
        text = text[2:]
    text = text.lstrip("/")
    if not text:
        raise ToolError(f"glob pattern {pattern!r} is empty")
    try:
        return GlobMatcher(re.compile(_translate(text)), "/" not in text)
    except re.error as exc:
        raise ToolError(f"glob pattern {pattern!r} cannot be used: {exc}") from None


def _translate(pattern: str, in_braces: bool = False) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        elif c == "{" and not in_braces and (end := pattern.find("}", i)) != -1:
            options = pattern[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_translate(o, True) for o in options) + ")")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


# -- walking the workspace -----------------------------------------------------------------


@dataclass
class _Walk:
    """What a walk saw, for the footer of an answer."""

    scanned: int = 0
    stopped: bool = False  # MAX_SCANNED_FILES reached
    skipped_large: int = 0
    readable: tuple[Path, ...] = ()  # where a symlinked file may lead: workspace, search root
    specs: list[tuple[Path, pathspec.GitIgnoreSpec]] = field(default_factory=list)


def _files(root: Path, walk: _Walk) -> Iterator[Path]:
    """The files under root in path order, without .git/, ignored paths or symlinked folders."""
    walk.specs = _outer_specs(root)
    yield from _files_in(root, walk)


def _files_in(folder: Path, walk: _Walk) -> Iterator[Path]:
    pushed = _load_spec(folder)
    if pushed is not None:
        walk.specs.append((folder, pushed))
    try:
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return  # an unreadable folder is skipped, as git and ripgrep skip it
        for entry in entries:
            if entry.name == ".git":
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file()
            except OSError:
                continue
            path = Path(entry.path)
            if _ignored(path, is_dir, walk.specs):
                continue
            if is_dir:
                yield from _files_in(path, walk)
            elif is_file:
                if walk.scanned >= MAX_SCANNED_FILES:
                    walk.stopped = True
                    return
                walk.scanned += 1
                yield path
            if walk.stopped:
                return
    finally:
        if pushed is not None:
            walk.specs.pop()


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, pathspec.GitIgnoreSpec]]) -> bool:
    ignored = False
    for base, spec in specs:  # outermost first: a deeper .gitignore has the last word
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            continue
        result = spec.check_file(rel + "/" if is_dir else rel)
        if result.include is not None:
            ignored = result.include
    return ignored


def _outer_specs(root: Path) -> list[tuple[Path, pathspec.GitIgnoreSpec]]:
    """The ignore rules from above root that apply below it: the .gitignore files up to the
    repository's top (the folder with .git), and its .git/info/exclude."""
    found: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
    for folder in (root, *root.parents):
        if folder != root and (spec := _load_spec(folder)):
            found.append((folder, spec))
        if (folder / ".git").exists():
            if exclude := _load_spec(folder / ".git" / "info", "exclude"):
                found.append((folder, exclude))
            break
    else:
        return []  # not in a repository: only the .gitignore files at and below root count
    found.reverse()  # outermost first; .gitignore files beat info/exclude, deeper beat higher
    # A folder named on purpose is searched even when it is ignored itself (a build output,
    # a vendored package): the rules above it would otherwise hide all of it.
    if folder != root and _ignored(root, True, found):
        return []
    return found


def _load_spec(folder: Path, name: str = ".gitignore") -> pathspec.GitIgnoreSpec | None:
    try:
        lines = (folder / name).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    import pathspec  # loaded with the first .gitignore a search reads, not at start

    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except Exception:  # a pattern pathspec cannot read: git would skip it, we skip the file
        return None


def _shown_path(cwd: Path, path: Path) -> str:
    """Relative to the real cwd when under it (what the other tools take), else absolute.

    Pure path arithmetic: it runs for every file a search reports, so it resolves nothing.
    """
    return path.relative_to(cwd).as_posix() if path.is_relative_to(cwd) else str(path)


def _folder(root: Path, shown: str) -> None:
    try:
        st = os.stat(root)
    except OSError as exc:
        raise ToolError(f"cannot search {shown}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise ToolError(f"cannot search {shown}: it is not a folder")


def _footer(walk: _Walk) -> list[str]:
    notes = []
    if walk.stopped:
        notes.append(f"[stopped after scanning {MAX_SCANNED_FILES} files; name a narrower path]")
    if walk.skipped_large:
        notes.append(
            f"[skipped {walk.skipped_large} files larger than {MAX_GREP_FILE_BYTES} bytes]"
        )
    return notes


def _glob(ctx: ToolContext, root: Path, shown: str, matcher: GlobMatcher) -> str:
    _folder(root, shown)
    walk, cwd = _Walk(), ctx.cwd.resolve()
    hits = sorted(
        _shown_path(cwd, p)
        for p in _files(root, walk)
        if matcher.matches(p.relative_to(root).as_posix())
    )
    lines, used = [], 0
    for hit in hits[:MAX_GLOB_RESULTS]:
        if used + len(hit) + 1 > ctx.output_limit:
            break
        lines.append(hit)
        used += len(hit) + 1
    if len(lines) < len(hits):
        lines.append(f"[{len(hits) - len(lines)} more files not shown; narrow the pattern]")
    lines += _footer(walk)
    return "\n".join(lines) if hits else "\n".join(["No files match.", *_footer(walk)])


def _grep(
    ctx: ToolContext, root: Path, shown: str, regex: re.Pattern[str], only: GlobMatcher | None
) -> str:
    cwd = ctx.cwd.resolve()
    walk = _Walk(readable=(*workspace_roots(ctx), root))
    try:
        single = not stat.S_ISDIR(os.stat(root).st_mode)
    except OSError as exc:
        raise ToolError(f"cannot search {shown}: {exc.strerror}") from None
    files: Iterator[Path] = iter([root]) if single else _files(root, walk)
    lines: list[str] = []
    used, truncated = 0, False
    for path in files:
        if only is not None and not single and not only.matches(path.relative_to(root).as_posix()):
            continue
        text = _text_of(path, walk, shown if single else None)
        if text is None:
            continue
        name = ""  # named once it has a match: most files scanned have none
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line) is None:
                continue
            name = name or _shown_path(cwd, path)
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + " [line cut]"
            entry = f"{name}:{number}: {line}"
            if used + len(entry) + 1 > ctx.output_limit:
                truncated = True
                break
            lines.append(entry)
            used += len(entry) + 1
        if truncated:
            break
    if truncated:
        lines.append(
            f"[output cut at {ctx.output_limit} characters; narrow the pattern, path or glob]"
        )
    if not lines:
        lines.append(f"No matches for {regex.pattern!r}.")
    return "\n".join([*lines, *_footer(walk)])


def _text_of(path: Path, walk: _Walk, single: str | None) -> str | None:
    """A file's text, or None for a file grep passes over (binary, too large, unreadable);
    a file named on its own is an error instead, since the model asked for it."""
    try:
        # A symlink may lead out of the workspace, where reading needs the user's permission.
        if path.is_symlink() and not any(resolves_inside(path, r) for r in walk.readable):
            return None
        with path.open("rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise OSError(0, "not a regular file")
            data = f.read(MAX_GREP_FILE_BYTES + 1)
    except OSError as exc:
        if single is not None:
            raise ToolError(f"cannot search {single}: {exc.strerror}") from None
        return None
    if len(data) > MAX_GREP_FILE_BYTES:
        if single is not None:
            raise ToolError(f"cannot search {single}: larger than {MAX_GREP_FILE_BYTES} bytes")
        walk.skipped_large += 1
        return None
    try:
        return decode_text(data, single or str(path), verb="search")
    except ToolError:
        if single is not None:
            raise
        return None
