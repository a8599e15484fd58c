"""The notes command on a shared project root: import and export through the team's server,
and every surface of it naming the root `project (shared: <key>)` in text and adding
`"shared": "<key>"` to JSON."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from gitrepo import git_repo

from acp_memory.cli import main

KEY = "github.com/org/repo"


def _clone(folder: Path, origin: str) -> Path:
    return git_repo(folder, origin)


class Machine:
    """One developer's machine: a home of its own and a clone of the repository."""

    def __init__(self, tmp_path: Path, name: str, origin: str, dsn: str,
                 capsys: pytest.CaptureFixture[str]) -> None:
        self.home = tmp_path / name / "home"
        self.home.mkdir(parents=True)
        (self.home / "config.yaml").write_text(f'memory:\n  shared:\n    dsn: "{dsn}"\n')
        self.cwd = _clone(tmp_path / name / "repo", origin)
        self.capsys = capsys

    def notes(self, *argv: str, stdin: str = "") -> tuple[int, str, str]:
        old = sys.stdin
        sys.stdin = io.StringIO(stdin)
        try:
            code = main(["notes", *argv, "--home", str(self.home), "--cwd", str(self.cwd),
                         "--log-level", "error"])
        finally:
            sys.stdin = old
        out, err = self.capsys.readouterr()
        return code, out, err


@pytest.fixture
def machines(tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
             ) -> tuple[Machine, Machine]:
    return (Machine(tmp_path, "alice", "git@github.com:Org/Repo.git", pg_dsn, capsys),
            Machine(tmp_path, "bob", "https://bob@github.com/Org/Repo", pg_dsn, capsys))


def _offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Machine, Path]:
    """A machine whose DSN names a socket folder with no server in it, and that folder."""
    gone = tmp_path / "no-server"
    gone.mkdir()
    return (Machine(tmp_path, "alice", "git@github.com:Org/Repo.git",
                    f"postgresql://alice@/team?host={gone}", capsys), gone)


def _folder(tmp_path: Path) -> Path:
    src = tmp_path / "old-memory"
    (src / "api").mkdir(parents=True)
    (src / "api" / "auth.md").write_text("Tokens expire after 15 minutes.\n")
    (src / "deploy.md").write_text("Deploy with `make release`.\n")
    return src


def test_an_import_on_one_machine_is_exported_on_another_through_the_server(
    machines: tuple[Machine, Machine], tmp_path: Path
) -> None:
    alice, bob = machines
    code, out, err = alice.notes("import", "project:", str(_folder(tmp_path)))
    assert (code, err) == (0, "")
    assert out == f"imported 2 notes into project (shared: {KEY}): 2 new, 0 updated, 0 unchanged\n"
    dest = tmp_path / "bob-export"
    code, out, err = bob.notes("export", "project:", str(dest))
    assert (code, err) == (0, "")
    assert out == (f"exported 2 notes from project (shared: {KEY}) to {dest}: 2 new, "
                   "0 replaced, 0 unchanged\n")
    assert (dest / "api" / "auth.md").read_text() == "Tokens expire after 15 minutes.\n"
    code, out, _ = bob.notes("import", "project:", str(dest))
    assert out == f"imported 0 notes into project (shared: {KEY}): 0 new, 0 updated, 2 unchanged\n"


def test_the_notes_surfaces_name_the_shared_root_and_add_its_key_to_json(
    machines: tuple[Machine, Machine], tmp_path: Path
) -> None:
    alice, bob = machines
    alice.notes("import", "project:", str(_folder(tmp_path)))
    _, listing, _ = bob.notes("list", "project:")
    assert listing.splitlines()[0] == f"project: (shared: {KEY}) (2 entries)"
    _, found, _ = bob.notes("search", "tokens expire", "--scope", "project")
    assert f"in project (shared: {KEY})" in found
    _, found, _ = bob.notes("search", "tokens expire", "--json")
    hits = json.loads(found)
    assert hits and all(h["shared"] == KEY for h in hits if h["path"].startswith("project:"))
    _, log, _ = bob.notes("log", "--json")
    changes = json.loads(log)
    assert {c["path"] for c in changes} >= {"api/auth.md", "deploy.md"}
    assert all(c["shared"] == KEY for c in changes if c["root"] == "project")
    assert all("shared" not in c for c in changes if c["root"] == "global")


def test_an_import_with_the_server_down_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alice, gone = _offline(tmp_path, capsys)
    code, out, err = alice.notes("import", "project:", str(_folder(tmp_path)))
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert err.startswith(f"acp-memory notes: shared project memory postgresql://alice@/team"
                          f"?host={gone}: cannot connect: ")
    assert "the import stopped" in err


def test_an_export_with_the_server_down_writes_the_local_copy_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alice, gone = _offline(tmp_path, capsys)
    dest = tmp_path / "out"
    code, out, err = alice.notes("export", "project:", str(dest))
    assert code == 0
    assert err.count("\n") == 1
    assert err.startswith(f"acp-memory notes: shared project memory postgresql://alice@/team"
                          f"?host={gone}: cannot connect: ")
    assert err.endswith("; exported the local copy\n")
    assert out == (f"exported 0 notes from project (shared: {KEY}) to {dest}: 0 new, "
                   "0 replaced, 0 unchanged\n")


def test_a_folder_with_no_project_key_keeps_its_notes_on_disk_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No server is reached: without a key the project scope never asks for one.
    alice = Machine(tmp_path, "alice", "git@github.com:Org/Repo.git",
                    "postgresql://alice@/team?host=/nonexistent-acp-memory-pg", capsys)
    alice.cwd = tmp_path / "scratch"
    alice.cwd.mkdir()
    code, _, err = alice.notes("write", "project:todo.md", stdin="buy milk\n")
    assert code == 0 and (alice.cwd / "memory" / "todo.md").read_text() == "buy milk\n"
    assert err.splitlines() == [
        f"acp-memory notes: shared project memory is off for {alice.cwd}: {alice.cwd} is not "
        "in a git repository; set memory.shared.project to share its notes; its project notes "
        f"stay in {alice.cwd / 'memory'}"]
