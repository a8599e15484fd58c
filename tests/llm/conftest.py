"""Fixtures for the provider tests: fake servers and one shared httpx client per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fakes.anthropic_server import FakeAnthropic
from fakes.openai_server import FakeOpenAI


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def openai_server() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def anthropic_server() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as http:
        yield http
