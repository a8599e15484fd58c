"""`doctor` checks memory.embeddings.model as a search would use it, without the network."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from fakes.embeddings_server import FakeEmbeddings, keyed, unreachable_url

from acp_memory.cli import main
from acp_memory.config import resolve_paths
from acp_memory.doctor import Finding, check

UNKNOWN = (
    "memory.embeddings.model: model 'ghost/nomic-embed-text' names provider 'ghost', which is "
    "not configured (configured providers: openai, claude, ollama; the built-in one is 'offline')"
)
PROVIDERS = """
providers:
  - {name: openai, type: openai, api_key: "${OPENAI_API_KEY}"}
  - {name: claude, type: anthropic, api_key: sk-a}
  - {name: ollama, type: openai, api_base: "http://localhost:11434/v1"}
"""


@pytest.fixture(autouse=True)
def no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def embeddings_findings(tmp_path: Path, model: str) -> list[Finding]:
    config = tmp_path / "config.yaml"
    config.write_text(PROVIDERS + f"memory: {{enable: true, embeddings: {{model: {model!r}}}}}\n")
    paths = resolve_paths(home=str(tmp_path / "home"), config=str(config), cwd=str(tmp_path))
    return [f for f in check(paths, explicit=True) if "memory.embeddings" in f.text]


@pytest.mark.parametrize(
    ("model", "finding"),
    [
        ("", None),
        ("ghost/nomic-embed-text", Finding("error", UNKNOWN)),
        (
            "claude/voyage-3",
            Finding(
                "error",
                "memory.embeddings.model: provider 'claude' is of type anthropic, which serves "
                "no /embeddings",
            ),
        ),
        (
            "openai/text-embedding-3-small",
            Finding(
                "error",
                "memory.embeddings.model: no API key for provider 'openai': set "
                "providers[].api_key or OPENAI_API_KEY",
            ),
        ),
        # A server of one's own needs no key.
        (
            "ollama/nomic-embed-text",
            Finding(
                "ok",
                "memory.embeddings: ollama/nomic-embed-text from "
                "http://localhost:11434/v1/embeddings",
            ),
        ),
    ],
)
def test_doctor_says_whether_the_embeddings_model_can_be_served(tmp_path, model, finding):
    assert embeddings_findings(tmp_path, model) == ([finding] if finding else [])


def test_doctor_takes_the_official_apis_embeddings_key_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-o")
    assert embeddings_findings(tmp_path, "openai/text-embedding-3-small") == [
        Finding(
            "ok",
            "memory.embeddings: openai/text-embedding-3-small from "
            "https://api.openai.com/v1/embeddings",
        )
    ]


# -- --online asks for one embedding --------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeEmbeddings]:
    """An embeddings server taking sk-good, on an event loop in another thread (the doctor
    runs its own)."""
    fake = FakeEmbeddings(keyed({}, default=[0.6, 0.8, 0.0]), api_key="sk-good")
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(fake):
        yield fake


def online_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str], api_base: str) -> list[str]:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"providers: [{{name: local, type: openai, api_base: {api_base!r}, api_key: sk-good}}]\n"
        "memory: {enable: true, embeddings: {model: local/minilm}}\n"
    )
    home, cwd = str(tmp_path / "home"), str(tmp_path)
    main(["doctor", "--online", "--config", str(config), "--home", home, "--cwd", cwd])
    return capsys.readouterr().out.splitlines()


def test_online_asks_the_embeddings_model_for_one_vector(tmp_path, capsys, server):
    lines = online_lines(tmp_path, capsys, server.base_url)
    assert (
        f"ok: memory.embeddings: {server.base_url}/embeddings embedded a probe "
        "(local/minilm, 3 dimensions)"
    ) in lines
    # A provider serving embeddings alone is not asked for a chat completion.
    assert "ok: provider 'local' serves memory.embeddings only: not asked for a completion" in lines
    assert lines[-1] == "0 error(s), 0 warning(s)"
    assert [(r.path, r.json) for r in server.requests] == [
        ("/v1/embeddings", {"model": "minilm", "input": ["acp-memory doctor"]})
    ]


def test_online_reports_an_embeddings_server_that_refuses_the_key_or_is_down(
    tmp_path, capsys, server
):
    server.api_key = "sk-other"
    lines = online_lines(tmp_path, capsys, server.base_url)
    assert (
        f"error: memory.embeddings: {server.base_url}/embeddings answered HTTP 401: not "
        "authorised (check the provider's api_key)"
    ) in lines
    assert lines[-1] == "1 error(s), 0 warning(s)"
    down = unreachable_url()
    lines = online_lines(tmp_path, capsys, down)
    assert f"error: memory.embeddings: cannot reach {down}/embeddings" in lines
    assert lines[-1] == "1 error(s), 0 warning(s)"


def test_online_does_not_ask_a_model_that_cannot_be_served(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text(
        "providers: [{name: offline, type: offline}]\n"
        "memory: {enable: true, embeddings: {model: ghost/minilm}}\n"
    )
    home, cwd = str(tmp_path / "home"), str(tmp_path)
    main(["doctor", "--online", "--config", str(config), "--home", home, "--cwd", cwd])
    said = [line for line in capsys.readouterr().out.splitlines() if "memory.embeddings" in line]
    assert said == [
        "error: memory.embeddings.model: model 'ghost/minilm' names provider 'ghost', which is "
        "not configured (configured providers: offline; the built-in one is 'offline')"
    ]
