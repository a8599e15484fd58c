"""glob and grep: what they find, what they skip (.git/, .gitignore, binary files), how their
output is bounded, and the bad input they answer with a tool error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes.script import call, tool_calls
from filetools_kit import finished_calls, open_session, prompt, scripted_agent, tool_results

from acp_memory.tools import search
from acp_memory.tools.base import ToolContext, ToolResult
from acp_memory.tools.registry import ToolRegistry
from acp_memory.tools.search import Glob, Grep

pytestmark = pytest.mark.anyio


def tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(body)


async def run(tool: str, cwd: Path, output_limit: int = 30_000, **args: Any) -> ToolResult:
    ctx = ToolContext("sess_x", cwd, "ask", output_limit=output_limit)
    return await ToolRegistry([Glob(), Grep()]).for_mode("ask").execute(tool, json.dumps(args), ctx)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    tree(
        root,
        {
            ".git/config": "[core]\nhello = from git\n",
            ".gitignore": "build/\n*.log\n!keep.log\n",
            "main.py": "import os\nprint('Hello')\n",
            "src/app.py": "def hello():\n    return 'hello world'\n",
            "src/util.pyi": "def hello() -> str: ...\n",
            "src/.gitignore": "generated.py\n",
            "src/generated.py": "hello = 'generated'\n",
            "build/out.py": "hello = 'built'\n",
            "debug.log": "hello from the log\n",
            "keep.log": "hello kept\n",
            "logo.png": b"\x89PNG\r\n\x00\x00hello",
            "docs/README.md": "Say hello.\n",
        },
    )
    return root


async def test_glob_finds_files_at_any_depth_sorted_and_skips_what_git_ignores(project):
    result = await run("glob", project, pattern="*.py")
    assert result.text.splitlines() == ["main.py", "src/app.py"]


@pytest.mark.parametrize(
    ("pattern", "found"),
    [
        ("**/*.py", ["main.py", "src/app.py"]),
        ("src/*.{py,pyi}", ["src/app.py", "src/util.pyi"]),
        ("src/app.p?", ["src/app.py"]),
        ("*.[lm][od]*", ["docs/README.md", "keep.log"]),
        ("docs/**", ["docs/README.md"]),
    ],
)
async def test_glob_patterns(project, pattern, found):
    assert (await run("glob", project, pattern=pattern)).text.splitlines() == found


async def test_glob_in_an_ignored_folder_named_on_purpose_searches_it(project):
    result = await run("glob", project, pattern="*.py", path="build")
    assert result.text == "build/out.py"


async def test_glob_output_is_bounded_with_a_marker(project, monkeypatch):
    monkeypatch.setattr(search, "MAX_GLOB_RESULTS", 2)
    tree(project, {f"many/f{i:02}.txt": "" for i in range(5)})
    result = await run("glob", project, pattern="many/*.txt")
    assert result.text.splitlines() == [
        "many/f00.txt",
        "many/f01.txt",
        "[3 more files not shown; narrow the pattern]",
    ]


async def test_grep_answers_path_line_text_and_skips_ignored_binary_and_git_files(project):
    result = await run("grep", project, pattern="hello")
    assert result.text.splitlines() == [
        "docs/README.md:1: Say hello.",
        "keep.log:1: hello kept",
        "src/app.py:1: def hello():",
        "src/app.py:2:     return 'hello world'",
        "src/util.pyi:1: def hello() -> str: ...",
    ]


async def test_grep_ignore_case_and_glob_narrow_the_search(project):
    result = await run("grep", project, pattern="^.*HELLO", ignore_case=True, glob="*.py")
    assert result.text.splitlines() == [
        "main.py:2: print('Hello')",
        "src/app.py:1: def hello():",
        "src/app.py:2:     return 'hello world'",
    ]


async def test_grep_one_named_file(project):
    result = await run("grep", project, pattern="return", path="src/app.py")
    assert result.text == "src/app.py:2:     return 'hello world'"


async def test_grep_output_is_bounded_by_the_output_limit_with_a_marker(project):
    tree(project, {"big.txt": "".join(f"match {i}\n" for i in range(1000))})
    result = await run("grep", project, output_limit=200, pattern="match", path="big.txt")
    lines = result.text.splitlines()
    assert lines[-1] == "[output cut at 200 characters; narrow the pattern, path or glob]"
    assert lines[0] == "big.txt:1: match 0"
    assert len("\n".join(lines[:-1])) <= 200


async def test_grep_says_so_when_nothing_matches(project):
    result = await run("grep", project, pattern="no such words")
    assert not result.is_error and result.text == "No matches for 'no such words'."


@pytest.mark.parametrize(
    ("tool", "args", "words"),
    [
        ("grep", {"pattern": "(unclosed"}, "not a valid regular expression"),
        ("grep", {"pattern": "x", "path": "missing"}, "cannot search missing"),
        ("grep", {"pattern": "x", "path": "logo.png"}, "binary file"),
        ("glob", {"pattern": "*", "path": "main.py"}, "it is not a folder"),
        ("glob", {"pattern": "  "}, "is empty"),
        ("glob", {"pattern": "*", "path": "../.."}, "outside the working directory"),
    ],
)
async def test_bad_search_input_is_a_tool_error(project, tool, args, words):
    result = await run(tool, project, **args)
    assert result.is_error and words in result.text


async def test_glob_and_grep_through_the_agent(paths):
    tree(paths.cwd, {"a/one.md": "alpha\nbeta\n", "b/two.md": "gamma beta\n"})
    replies = [
        tool_calls(call("glob", {"pattern": "**/*.md"})),
        tool_calls(call("grep", {"pattern": "beta"})),
    ]
    async with scripted_agent(paths, *replies) as (server, ed, _):
        sid = await open_session(ed, paths)
        await ed.conn.set_session_mode(session_id=sid, mode_id="ask")
        assert await prompt(ed, sid, "Find beta.") == "end_turn"
        statuses = [u.status for u in finished_calls(ed, sid)]
    assert statuses == ["completed", "completed"]
    assert tool_results(server) == [
        "a/one.md\nb/two.md",
        "a/one.md:2: beta\nb/two.md:1: gamma beta",
    ]


async def test_the_rules_above_a_searched_subfolder_and_git_info_exclude_apply(project):
    tree(project, {"src/trace.log": "hello trace\n", ".git/info/exclude": "docs/\n"})
    assert (await run("grep", project, pattern="trace", path="src")).text.startswith("No matches")
    assert (await run("glob", project, pattern="*.md")).text == "No files match."


async def test_grep_never_reads_through_a_symlink_out_of_the_workspace(project, tmp_path):
    tree(tmp_path / "outside", {"key.txt": "hello secret\n"})
    (project / "leak.txt").symlink_to(tmp_path / "outside" / "key.txt")
    (project / "leakdir").symlink_to(tmp_path / "outside", target_is_directory=True)
    (project / "alias.py").symlink_to(project / "main.py")  # one that stays inside is read
    result = await run("grep", project, pattern="secret|Hello")
    assert result.text.splitlines() == ["alias.py:2: print('Hello')", "main.py:2: print('Hello')"]
