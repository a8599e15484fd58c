"""`acp-memory notes ...` through the real argument parser, with the tools' safeguards."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from memory.notes_kit import Run, Terminal, notes_runner

from acp_memory.cli_parser import build_parser
from acp_memory.memory import store as store_module

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    return notes_runner(tmp_path, capsys)


def seed(tmp_path: Path) -> None:
    root = tmp_path / "h" / "memory"
    (root / "infra").mkdir(parents=True)
    (root / "infra" / "deploy.md").write_text("Rotate the deploy keys monthly.")
    (tmp_path / "w" / "memory").mkdir(parents=True)
    (tmp_path / "w" / "memory" / "cats.md").write_text("Кошки спят днём.")


def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    script = tmp_path / "editor.py"
    script.write_text(code)
    monkeypatch.setenv("VISUAL", f"{sys.executable} {script}")


def test_list_shows_both_roots_and_one_folder(run: Run, tmp_path: Path) -> None:
    seed(tmp_path)
    code, out, _ = run("list")
    assert code == 0 and "global:infra/" in out and "project:cats.md" in out
    code, out, _ = run("list", "global:infra")
    assert "global:infra/deploy.md" in out


def test_counts_are_singular_for_one(run: Run, tmp_path: Path) -> None:
    seed(tmp_path)
    code, out, _ = run("list", "global:infra")
    assert code == 0 and out.startswith("global:infra/ (1 entry)\n")
    code, out, _ = run("search", "deploy", "--scope", "global")
    assert out.startswith("1 matching note for 'deploy' in global (best first):")
    assert run("rm", "-r", "-y", "global:infra")[1].startswith("deleted global:infra/ (1 note)\n")


def test_listing_a_folder_that_does_not_exist_says_so(run: Run, tmp_path: Path) -> None:
    code, out, err = run("list", "project:nope")
    assert (code, out) == (1, "")
    assert err == "acp-memory notes: no such folder project:nope\n"
    code, out, _ = run("list", "project:")  # a root not created yet is just empty
    assert code == 0 and "project: is empty" in out


def test_search_prints_text_and_json_on_request(run: Run, tmp_path: Path) -> None:
    seed(tmp_path)
    code, out, _ = run("search", "rotating keys")
    assert code == 0 and out.startswith("1 matching note for 'rotating keys' in global and "
                                        "project (best first):\n\n[1] global:infra/deploy.md")
    code, out, _ = run("search", "rotating keys", "--json")
    (hit,) = json.loads(out)
    assert code == 0 and hit["path"] == "global:infra/deploy.md"
    assert set(hit) == {"path", "score", "snippet"}


def test_search_dash_answers_each_line_of_stdin_in_turn(run: Run, tmp_path: Path) -> None:
    seed(tmp_path)
    code, out, _ = run("search", "-", "--scope", "project", "--limit", "1",
                       stdin="кошка\nnothing at all\n")
    assert code == 0
    assert out == ("1 matching note for 'кошка' in project (best first):\n\n"
                   "[1] project:cats.md (score " + out.split("(score ", 1)[1].split(")")[0]
                   + ")\nКошки спят днём.\n"
                   "no matching notes for 'nothing at all' in project.\n")
    code, out, _ = run("search", "-", "--scope", "project", "--limit", "1", "--json",
                       stdin="кошка\nnothing at all\n")
    lines = out.splitlines()
    assert [len(json.loads(line)) for line in lines] == [1, 0]
    assert json.loads(lines[0])[0]["path"] == "project:cats.md"


def test_show_and_rm_follow_the_same_rules(run: Run, tmp_path: Path) -> None:
    seed(tmp_path)
    assert run("show", "global:infra/deploy.md")[1] == "Rotate the deploy keys monthly."
    code, _, err = run("show", "global:../../etc/passwd")
    assert code == 1 and "'..'" in err
    code, _, err = run("rm", "global:")
    assert code == 1 and "never deleted" in err
    code, out, err = run("rm", "global:infra/deploy.md")
    assert (code, err) == (0, "") and out.startswith("deleted global:infra/deploy.md\n")


def test_rm_of_a_folder_needs_r_and_a_yes(run: Run, tmp_path: Path) -> None:
    seed(tmp_path)
    folder = tmp_path / "h" / "memory" / "infra"
    assert run("rm", "global:infra") == (
        1, "", "acp-memory notes: global:infra/ is a folder; use rm -r to delete it and its "
               "1 note\n")
    code, out, err = run("rm", "-r", "global:infra")  # stdin is not a terminal: no one to ask
    assert (code, out) == (1, "") and "add -y" in err and len(err.splitlines()) == 1
    code, _, err = run("rm", "-r", "global:infra", stdin=Terminal("n\n"))
    assert code == 1 and err.endswith("[y/N] nothing was deleted\n")
    assert folder.is_dir()
    code, out, err = run("rm", "-r", "global:infra", stdin=Terminal("y\n"))
    assert (code, out.splitlines()[0]) == (0, "deleted global:infra/ (1 note)")
    assert err == "delete global:infra/ and the 1 note under it? [y/N] "
    assert not folder.exists()


def test_edit_goes_through_redaction_and_the_size_limit(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_tempdir: Path
) -> None:
    seed(tmp_path)
    editor(tmp_path, monkeypatch, "import sys; p = sys.argv[1]; t = open(p).read()\n"
                                  "open(p, 'w').write(t + '\\npassword: hunter22\\n')\n")
    code, out, _ = run("edit", "global:infra/deploy.md")
    assert code == 0 and out.startswith("updated global:infra/deploy.md")
    text = (tmp_path / "h" / "memory" / "infra" / "deploy.md").read_text()
    assert "hunter22" not in text and "[REDACTED:password]" in text
    assert list(private_tempdir.iterdir()) == []  # the copy went with the save
    editor(tmp_path, monkeypatch, "import sys; open(sys.argv[1], 'w').write('x' * 20000)\n")
    code, _, err = run("edit", "global:infra/deploy.md")
    (kept,) = private_tempdir.iterdir()
    assert code == 1 and "over the limit" in err and f"kept in {kept}" in err
    assert len(err.splitlines()) == 1 and kept.read_text() == "x" * 20000
    assert (tmp_path / "h" / "memory" / "infra" / "deploy.md").read_text() == text


def test_edit_never_overwrites_a_change_made_while_the_editor_was_open(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(tmp_path)
    note = tmp_path / "h" / "memory" / "infra" / "deploy.md"
    editor(tmp_path, monkeypatch, f"import sys\nopen({str(note)!r}, 'w').write('meanwhile')\n"
                                  "open(sys.argv[1], 'w').write('my edit')\n")
    code, _, err = run("edit", "global:infra/deploy.md")
    assert code == 1 and "changed by someone else" in err and "kept in" in err
    assert note.read_text() == "meanwhile"


def test_edit_refuses_a_bad_path_before_starting_the_editor(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "editor-ran"
    editor(tmp_path, monkeypatch, f"open({str(marker)!r}, 'w').write('x')\n")
    code, _, err = run("edit", "global:notes.json")
    assert code == 1 and "not a note path" in err
    assert not marker.exists()


@pytest.mark.parametrize("command", ["nonexistent-editor-4e1f", "nonexistent-editor-4e1f --wait"])
def test_an_editor_that_cannot_run_is_one_line_and_leaves_no_copy(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_tempdir: Path,
    command: str,
) -> None:
    seed(tmp_path)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", command)
    code, out, err = run("edit", "global:infra/deploy.md")
    assert (code, out) == (1, "")
    assert err == (f"acp-memory notes: cannot run the editor {command!r} ($VISUAL or $EDITOR): "
                   f"{os.strerror(2)}\n")
    assert list(private_tempdir.iterdir()) == []


def test_an_editor_that_fails_keeps_only_text_that_changed(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_tempdir: Path
) -> None:
    seed(tmp_path)
    editor(tmp_path, monkeypatch, "raise SystemExit(3)\n")
    code, _, err = run("edit", "global:infra/deploy.md")
    assert code == 1 and err.endswith("exited with status 3\n")
    assert list(private_tempdir.iterdir()) == []
    editor(tmp_path, monkeypatch, "import sys; open(sys.argv[1], 'w').write('typed')\n"
                                  "raise SystemExit(3)\n")
    code, _, err = run("edit", "global:infra/deploy.md")
    (kept,) = private_tempdir.iterdir()
    assert code == 1 and err.endswith(f"exited with status 3; your text is kept in {kept}\n")


@pytest.mark.parametrize("why", ["read-only", "not a folder"])
def test_a_home_whose_cache_cannot_be_written_still_searches_and_says_so_once(
    tmp_path: Path, why: str
) -> None:
    seed(tmp_path)
    home = tmp_path / "h"
    if why == "read-only":
        if os.geteuid() == 0:
            pytest.skip("permissions do not stop root")
        home.chmod(0o555)
    else:
        (home / "cache").write_text("a file where the cache folder should be")
    try:
        # A real process: what the user sees on stderr is the logging set up by the CLI.
        done = subprocess.run(
            [sys.executable, "-m", "acp_memory", "notes", "search", "rotating keys",
             "--home", str(home), "--cwd", str(tmp_path / "w")],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    finally:
        home.chmod(0o755)
    assert done.returncode == 0 and "[1] global:infra/deploy.md" in done.stdout
    (line,) = done.stderr.splitlines()
    assert "search index: cannot write" in line and "in memory" in line


@pytest.mark.parametrize("action", ["edit", "rm"])
def test_a_failing_write_is_one_line_naming_the_note_and_the_file(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    seed(tmp_path)
    root = tmp_path / "h" / "memory"
    # A read-only folder does not stop root: the file system's refusal is played instead.
    def refused(path: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(store_module, "write_atomic", refused)
    monkeypatch.setattr(store_module, "remove", refused)
    editor(tmp_path, monkeypatch, "import sys; open(sys.argv[1], 'a').write(' and more')\n")
    argv = ("edit", "global:infra/deploy.md") if action == "edit" else ("rm", "-r", "-y",
                                                                        "global:infra")
    code, out, err = run(*argv)
    verb = "save global:infra/deploy.md" if action == "edit" else "delete global:infra"
    file = root / "infra" / ("deploy.md" if action == "edit" else "")
    assert (code, out) == (1, "")
    assert err.startswith(f"acp-memory notes: cannot {verb}: {file}: Permission denied")
    assert len(err.splitlines()) == 1
    assert (root / "infra" / "deploy.md").read_text() == "Rotate the deploy keys monthly."


@pytest.mark.parametrize(
    ("action", "example"),
    [("show", "global:prefs.md"), ("edit", "project:api/auth.md"), ("rm", "global:prefs.md"),
     ("write", "global:prefs.md"), ("purge", "global:prefs.md")],
)
def test_each_notes_action_has_a_description_and_explains_scope_paths(
    action: str, example: str
) -> None:
    parser = build_parser()
    notes = parser._subparsers._group_actions[0].choices["notes"]  # type: ignore[union-attr]
    actions = notes._subparsers._group_actions[0].choices
    for name in ("list", "search", "index", "show", "edit", "write", "rm", "purge"):
        assert actions[name].description, name
    text = " ".join(actions[action].format_help().split())
    assert "scope:path" in text and example in text
    assert "global:prefs.md" in " ".join(notes.format_help().split())


def test_search_limit_0_is_a_usage_error(run: Run, tmp_path: Path) -> None:
    seed(tmp_path)
    assert run("search", "deploy", "--limit", "0") == (
        2, "", "acp-memory notes: --limit must be at least 1\n"
    )


def test_a_search_cut_by_the_limit_says_how_many_matched(run: Run, tmp_path: Path) -> None:
    seed(tmp_path)
    (tmp_path / "w" / "memory" / "deploy.md").write_text("We deploy on Fridays.")
    code, out, _ = run("search", "deploy", "--limit", "1")
    assert code == 0 and out.startswith(
        "showing 1 of 2 matching notes for 'deploy' in global and project (best first):\n"
    )
    code, out, _ = run("search", "deploy", "--limit", "2")
    assert out.startswith("2 matching notes for 'deploy' in global and project (best first):")


def test_workspace_names_the_project_root_in_paths_and_scopes(run: Run, tmp_path: Path) -> None:
    seed(tmp_path)
    assert run("show", "workspace:cats.md")[1] == "Кошки спят днём."
    code, out, _ = run("search", "кошка", "--scope", "workspace")
    assert code == 0 and out.startswith("1 matching note for 'кошка' in project (best first):")
    assert "[1] project:cats.md" in out


def test_a_project_root_linking_out_of_the_workspace_is_left_out_with_one_warning(
    tmp_path: Path,
) -> None:
    seed(tmp_path)
    outside = tmp_path / "elsewhere"
    (tmp_path / "w" / "memory").rename(outside)
    (tmp_path / "w" / "memory").symlink_to(outside)
    refusal = (f"project root {tmp_path / 'w' / 'memory'} links outside the workspace to "
               f"{outside}; set memory.project_root_symlinks: allow")

    def notes(*argv: str) -> subprocess.CompletedProcess[str]:
        # A real process: the warning is what the CLI's logging prints.
        return subprocess.run(
            [sys.executable, "-m", "acp_memory", "notes", *argv, "--home", str(tmp_path / "h"),
             "--cwd", str(tmp_path / "w")],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )

    listed = notes("list")
    assert listed.returncode == 0 and listed.stdout.startswith("global: (1 entry)")
    assert "project" not in listed.stdout
    assert listed.stderr == f"acp-memory: {refusal}\n"
    shown = notes("show", "project:cats.md")
    assert (shown.returncode, shown.stdout, shown.stderr) == (
        1, "", f"acp-memory notes: {refusal}\n"
    )


@pytest.mark.parametrize("argv", [("list",), ("search", "deploy"), ("show", "global:long.md")])
def test_a_closed_stdout_ends_quietly_with_the_usual_status(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    seed(tmp_path)
    (tmp_path / "h" / "memory" / "long.md").write_text("deploy line\n" * 50_000)
    reader, writer = os.pipe()
    os.close(reader)  # the reader left before the first line, as `| head -0` would
    try:
        done = subprocess.run(
            [sys.executable, "-m", "acp_memory", "notes", *argv, "--home", str(tmp_path / "h"),
             "--cwd", str(tmp_path / "w")],
            stdout=writer, stderr=subprocess.PIPE, text=True, timeout=60, cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (0, "")


# -- rm's way back, write, purge -----------------------------------------------------------


def test_rm_prints_the_undo_that_brings_the_note_back(run: Run, tmp_path: Path) -> None:
    seed(tmp_path)
    note = tmp_path / "h" / "memory" / "infra" / "deploy.md"
    code, out, err = run("rm", "global:infra/deploy.md")
    deleted, undo_line = out.splitlines()
    assert (code, err, deleted) == (0, "", "deleted global:infra/deploy.md")
    assert undo_line.startswith("undo: acp-memory notes undo chg_") and not note.exists()
    assert run(*undo_line.split()[3:], "-y")[0] == 0
    assert note.read_text() == "Rotate the deploy keys monthly."


def test_write_saves_stdin_through_the_rules_of_every_write(run: Run, tmp_path: Path) -> None:
    note = tmp_path / "h" / "memory" / "tools.md"
    code, out, err = run("write", "global:tools.md", stdin="I use uv.\npassword: hunter2hunter2\n")
    saved, redacted, undo_line = out.splitlines()
    assert (code, err) == (0, "") and saved == "saved new note global:tools.md (40 bytes)."
    assert redacted.startswith("Removed 1 secret before writing (password x1)")
    assert note.read_text() == "I use uv.\npassword: [REDACTED:password]\n"
    assert undo_line.startswith("undo: acp-memory notes undo chg_")
    code, out, _ = run("log", "--json", "--limit", "1")
    assert json.loads(out)[0]["id"] == undo_line.split()[-1]
    code, out, _ = run("write", "global:tools.md", stdin="I use uv and ruff.\n")
    assert code == 0 and out.startswith("updated global:tools.md: replaced the existing note")
    assert run("write", "global:big.md", stdin="x" * 20000)[0] == 1  # the size limit holds


@pytest.mark.parametrize("stdin", ["", " \n\n", "terminal"])
def test_write_refuses_an_empty_text_or_a_terminal_in_one_line(
    run: Run, tmp_path: Path, stdin: str
) -> None:
    code, out, err = run("write", "global:tools.md",
                         stdin=Terminal("typed\n") if stdin == "terminal" else stdin)
    assert (code, out) == (1, "") and len(err.splitlines()) == 1
    why = "stdin, which is a terminal" if stdin == "terminal" else "the note body is empty"
    assert why in err
    assert not (tmp_path / "h" / "memory" / "tools.md").exists()


def test_purge_drops_a_folders_whole_history_and_is_itself_a_line_without_content(
    run: Run, tmp_path: Path
) -> None:
    assert run("write", "global:infra/db.md", stdin="postgres\n")[0] == 0
    assert run("write", "global:infra/db.md", stdin="postgres 16\n")[0] == 0
    assert run("write", "global:infra/deep/dns.md", stdin="bind\n")[0] == 0
    assert run("write", "global:other.md", stdin="other\n")[0] == 0
    assert run("rm", "global:other.md")[0] == 0
    code, out, err = run("purge", "global:infra", "-y")
    assert (code, err) == (0, "")
    assert out.startswith("purged global:infra from the memory history (3 changes); the purge "
                          "is chg_")
    log = json.loads(run("log", "--json")[1])
    assert [(c["action"], c["path"]) for c in log] == [
        ("purge", "infra"), ("delete", "other.md"), ("create", "other.md")]
    assert log[0]["summary"].startswith("history purged")
    # The notes themselves stay; the purge has nothing to undo.
    assert (tmp_path / "h" / "memory" / "infra" / "db.md").read_text() == "postgres 16\n"
    code, out, err = run("undo", log[0]["id"], "-y")
    assert (code, out) == (1, "") and "a purge cannot be undone" in err
    assert (tmp_path / "h" / "memory" / "infra" / "db.md").exists()
    assert run("purge", "global:infra", "-y")[1] == (
        "no changes of global:infra in the memory history: nothing was purged\n")


def test_purge_asks_on_a_terminal_and_without_one_wants_y(run: Run, tmp_path: Path) -> None:
    assert run("write", "global:prefs.md", stdin="tabs\n")[0] == 0
    code, out, err = run("purge", "global:prefs.md")
    assert (code, out) == (1, "")
    assert err == ("acp-memory notes: stdin is not a terminal to ask on; add -y to purge the "
                   "whole history of global:prefs.md\n")
    code, out, err = run("purge", "global:prefs.md", stdin=Terminal("n\n"))
    assert (code, out) == (1, "") and err.endswith("[y/N] nothing was purged\n")
    assert "drop the whole history of global:prefs.md from the memory history?" in err
    assert len(json.loads(run("log", "--json")[1])) == 1
    code, out, _ = run("purge", "global:prefs.md", stdin=Terminal("y\n"))
    assert code == 0 and out.startswith("purged global:prefs.md from the memory history (1 change)")
