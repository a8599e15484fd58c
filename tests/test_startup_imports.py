"""Cold start is imports: `python -m acp_memory` answers `initialize` without loading what only
sessions use (the runner, the engine, the notes and their index, the history, the models, the
tools, and the libraries behind them), which load at the first session request; the HTTP stack
and the MCP SDK load only once a model or server needs them, numpy only once embeddings are on,
psycopg only once the project memory is shared (`memory.shared`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp.schema import TextContentBlock
from harness import subprocess_agent

pytestmark = pytest.mark.anyio

# What an editor that only connected must not pay for: packages, each with what is under it.
LOADED_WITH_THE_FIRST_SESSION = (
    "numpy",
    "psycopg",
    "httpx",
    "pathspec",
    "mcp",
    "fastapi",
    "uvicorn",
    "acp_memory.acp.agent",
    "acp_memory.build",
    "acp_memory.runtime",
    "acp_memory.engine",
    "acp_memory.llm",
    "acp_memory.memory.index",
    "acp_memory.memory.history",
    "acp_memory.memory.store",
    "acp_memory.memory.redact",
    "acp_memory.sessions",
    "acp_memory.tools",
    "acp_memory.hooks",
)
# What a turn on the offline model, with embeddings off, never uses.
LOADED_WHEN_A_MODEL_OR_SERVER_NEEDS_IT = ("httpx", "mcp", "pathspec", "fastapi", "uvicorn",
                                          "numpy", "psycopg", "psycopg_pool")


@pytest.fixture
def importtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's stderr says each module as it is imported (python -X importtime)."""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")


def _imported(stderr: bytes, *packages: str) -> list[str]:
    """The modules of `packages` that -X importtime reported the process importing."""
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "acp_memory.acp.handshake" in names  # the report is read as it should be
    return sorted(n for n in names if any(n == p or n.startswith(p + ".") for p in packages))


async def test_the_agent_answers_initialize_without_loading_what_sessions_use(
    tmp_path: Path, importtime: None
) -> None:
    # The input ends after initialize: having never had a reason to build the agent, the
    # process imported only what the answer needed.
    async with subprocess_agent(tmp_path) as ed:
        answer = await ed.conn.initialize(protocol_version=1)
    assert answer.protocol_version == 1
    assert _imported(ed.stderr, *LOADED_WITH_THE_FIRST_SESSION) == []


async def test_a_turn_with_a_memory_run_on_the_offline_model_loads_no_http_stack_mcp_or_numpy(
    tmp_path: Path, importtime: None
) -> None:
    (tmp_path / "config.yaml").write_text("agent: {model: offline/default}\n")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "fruit.md").write_text("My favourite fruit is the mango.\n")
    async with subprocess_agent(tmp_path) as ed:
        session_id = await ed.start_session(tmp_path)
        done = await ed.conn.prompt(
            session_id=session_id,
            prompt=[TextContentBlock(type="text", text="What is my favourite fruit?")],
        )
    assert done.stop_reason == "end_turn"
    assert "acp_memory.engine.turn" in _imported(ed.stderr, "acp_memory.engine")  # it ran
    assert "acp_memory.memory.index.query" in _imported(ed.stderr, "acp_memory.memory")  # searched
    assert _imported(ed.stderr, *LOADED_WHEN_A_MODEL_OR_SERVER_NEEDS_IT) == []
