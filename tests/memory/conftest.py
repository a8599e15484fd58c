"""Fixtures for the memory store tests: throwaway roots and a cache folder per test."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def private_tempdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder for code under test (`notes edit`'s copy): inside tmp_path."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """A workspace folder holding one source file, src/api/server.py (notes cite it)."""
    folder = tmp_path / "work"
    (folder / "src" / "api").mkdir(parents=True)
    (folder / "src" / "api" / "server.py").write_text("app = 1\n")
    return folder


@pytest.fixture
def roots(tmp_path: Path) -> Roots:
    return Roots(tmp_path / "home" / "memory", tmp_path / "work" / "memory")


@pytest.fixture
def store(roots: Roots, tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore(roots, tmp_path / "home" / "cache", max_note_bytes=16 * 1024) as store:
        yield store
