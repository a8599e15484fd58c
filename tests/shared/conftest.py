"""Fixtures for the shared project root's tests: a session's cwd that is a clone of the
team's repository, and a config whose shared memory is the test's database."""

from __future__ import annotations

import pytest
from gitrepo import git_repo

from acp_memory.config import Config, Paths
from acp_memory.config.models import MemoryConfig, SharedMemoryConfig


@pytest.fixture
def clone(paths: Paths) -> Paths:
    """The session's cwd a clone of the team's repository (key `github.com/org/repo`)."""
    git_repo(paths.cwd, "git@github.com:Org/Repo.git")
    return paths


@pytest.fixture
def shared_config(pg_dsn: str) -> Config:
    """A config whose `memory.shared` is the test's database."""
    return Config(memory=MemoryConfig(shared=SharedMemoryConfig(dsn=pg_dsn)))
