"""The project key: memory.shared.project, else the cwd's git remote origin, normalised."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import git_repo

from acp_memory.memory.roots import Roots
from acp_memory.memory.shared.key import normalise_remote, project_key, shared_key_of


def _repo(folder: Path, origin: str | None) -> Path:
    return git_repo(folder, origin)


@pytest.mark.parametrize("url", [
    "git@github.com:Org/Repo.git",
    "https://x@github.com/Org/Repo",
    "https://user:secret@GitHub.com:8443/Org/Repo.git/",
    "ssh://git@github.com:22/Org/Repo.git",
    "github.com:Org/Repo",
])
def test_every_form_of_one_remote_normalises_to_one_key(url: str) -> None:
    assert normalise_remote(url) == "github.com/org/repo"


def test_a_normalised_key_keeps_no_password() -> None:
    assert "secret" not in normalise_remote("https://user:secret@host/team/repo.git")


def test_two_clones_with_the_same_remote_in_other_forms_share_a_key(tmp_path: Path) -> None:
    ssh = _repo(tmp_path / "one", "git@github.com:Org/Repo.git")
    https = _repo(tmp_path / "two", "https://x@github.com/Org/Repo")
    assert project_key("", ssh) == ("github.com/org/repo", "")
    assert project_key("", https) == ("github.com/org/repo", "")


def test_a_subfolder_gets_its_repositorys_key(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", "git@gitlab.example.com:Team/Api.git")
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    assert project_key("", sub) == ("gitlab.example.com/team/api", "")


def test_the_configured_project_wins_over_the_remote(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", "git@github.com:Org/Repo.git")
    assert project_key("  Acme/Payments ", repo) == ("acme/payments", "")
    assert project_key("git@github.com:Acme/Other.git", repo) == ("github.com/acme/other", "")


def test_a_repository_without_origin_has_no_key_and_says_why(tmp_path: Path) -> None:
    key, why = project_key("", _repo(tmp_path / "repo", None))
    assert key is None
    assert "no remote origin" in why and "memory.shared.project" in why


def test_a_folder_outside_any_repository_has_no_key_and_says_why(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    key, why = project_key("", plain)
    assert key is None
    assert "not in a git repository" in why


def test_without_git_there_is_no_key_and_it_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    key, why = project_key("", tmp_path / "without-git")
    assert key is None
    assert "git is not installed" in why


def test_only_the_shared_project_root_and_its_changes_carry_the_key(tmp_path: Path) -> None:
    copy = tmp_path / "cache" / "shared" / "abc" / "notes"
    roots = Roots(tmp_path / "global", copy, None, tmp_path / "repo", "github.com/org/repo")
    assert shared_key_of(roots, "project") == "github.com/org/repo"
    assert shared_key_of(roots, "project", str(copy)) == "github.com/org/repo"
    assert shared_key_of(roots, "global") is None
    # A change of the project's notes kept on disk before they were shared is not the team's.
    assert shared_key_of(roots, "project", str(tmp_path / "repo" / "memory")) is None
    assert shared_key_of(Roots(tmp_path / "global", copy), "project") is None
