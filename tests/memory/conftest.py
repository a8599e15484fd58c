"""Fixtures for the memory store tests: throwaway roots and a cache folder per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def roots(tmp_path: Path) -> Roots:
    return Roots(tmp_path / "home" / "memory", tmp_path / "work" / "memory")


@pytest.fixture
def store(roots: Roots, tmp_path: Path) -> MemoryStore:
    return MemoryStore(roots, tmp_path / "home" / "cache", max_note_bytes=16 * 1024)
