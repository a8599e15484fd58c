"""`doctor --online`: one tiny call per provider, against fake servers on loopback."""

from __future__ import annotations

import argparse
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from fakes.anthropic_server import FakeAnthropic
from fakes.openai_server import FakeOpenAI
from fakes.script import error, page, text

from acp_memory.cli import main
from acp_memory.doctor import run_doctor

Servers = tuple[FakeOpenAI, FakeAnthropic]


@pytest.fixture
def servers() -> Iterator[Servers]:
    """An OpenAI server taking sk-good and an Anthropic one taking sk-right.

    They run on an event loop in another thread: run_doctor starts its own.
    """
    openai = FakeOpenAI(default=text("OK"), api_key="sk-good")
    anthropic = FakeAnthropic(default=text("OK"), api_key="sk-right")
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(openai),
        portal.wrap_async_context_manager(anthropic),
    ):
        yield openai, anthropic


@pytest.fixture(autouse=True)
def no_keys_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOD_API_KEY", "GONE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def free_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def doctor(tmp_path: Path, config: str, **flags: object) -> int:
    path = tmp_path / "config.yaml"
    path.write_text(config + "memory: {enable: true}\n")  # else a warning says memory is off
    home = tmp_path / "home"
    args = argparse.Namespace(
        home=str(home), config=str(path), sessions_dir=None, cwd=str(tmp_path), **flags
    )
    return run_doctor(args)


def test_online_reports_each_provider_reachable_rejected_or_unreachable(
    tmp_path, capsys, servers: Servers
):
    openai, anthropic = servers
    port = free_port()
    config = f"""
providers:
  - {{name: offline, type: offline}}
  - {{name: good, type: openai, api_base: "{openai.base_url}", api_key: sk-good}}
  - {{name: bad, type: anthropic, api_base: "{anthropic.base_url}", api_key: sk-wrong}}
  - {{name: gone, type: openai, api_base: "http://127.0.0.1:{port}/v1"}}
models:
  - {{model: good/gpt-test}}
  - {{model: bad/claude-test}}
  - {{model: gone/llama}}
agent: {{model: good/gpt-test}}
"""
    code = doctor(tmp_path, config, online=True)
    lines = capsys.readouterr().out.splitlines()

    assert code == 1
    assert "ok: provider 'offline' is the built-in offline model: no network check needed" in lines
    assert (
        f"ok: provider 'good' at {openai.url} is reachable and accepted the key (model gpt-test)"
        in lines
    )
    assert (
        f"error: provider 'bad' at {anthropic.url} rejected the key: "
        "401 Unauthorized: fake server: invalid API key"
    ) in lines
    gone = f"error: provider 'gone' at http://127.0.0.1:{port}/v1/chat/completions is unreachable: "
    assert [line for line in lines if line.startswith(gone)], lines
    assert lines[-1] == "2 error(s), 0 warning(s)"
    # One tiny call each: a single token, no stream.
    for server, model in ((openai, "gpt-test"), (anthropic, "claude-test")):
        assert [
            (r.json["model"], r.json["max_tokens"], r.json["stream"]) for r in server.requests
        ] == [(model, 1, False)]


def test_online_passes_when_every_provider_answers(tmp_path, capsys, servers: Servers):
    openai, _ = servers
    config = f"""
providers:
  - {{name: good, type: openai, api_base: "{openai.base_url}", api_key: sk-good}}
  - {{name: idle, type: anthropic, api_key: sk-x}}
agent: {{model: good/gpt-test}}
"""
    assert doctor(tmp_path, config, online=True) == 0
    out = capsys.readouterr().out
    assert "warning: provider 'idle' not checked online: no configured model uses it" in out
    assert out.endswith("0 error(s), 1 warning(s)\n")


def test_a_busy_provider_is_a_warning_and_a_wrong_model_an_error(
    tmp_path, capsys, servers: Servers
):
    openai, anthropic = servers
    openai.script(error(503, "overloaded"))
    anthropic.script(error(404, "model: claude-nope"))
    config = f"""
providers:
  - {{name: good, type: openai, api_base: "{openai.base_url}", api_key: sk-good}}
  - {{name: right, type: anthropic, api_base: "{anthropic.base_url}", api_key: sk-right}}
models: [{{model: good/gpt-test}}, {{model: right/claude-nope}}]
"""
    assert doctor(tmp_path, config, online=True) == 1
    lines = capsys.readouterr().out.splitlines()
    assert (
        f"warning: provider 'good' at {openai.url} is reachable, but a 1-token call to gpt-test "
        "failed: 503 Service Unavailable: overloaded"
    ) in lines
    assert (
        f"error: provider 'right' at {anthropic.url} is reachable, but a 1-token call to "
        "claude-nope failed: 404 Not Found: model: claude-nope"
    ) in lines


def test_a_web_page_where_a_model_api_belongs_is_an_error(tmp_path, capsys, servers: Servers):
    openai, _ = servers
    openai.script(page(200, "<html>\n<body>Welcome to nginx!</body>\n</html>"))
    config = f"""
providers: [{{name: web, type: openai, api_base: "{openai.base_url}", api_key: sk-good}}]
agent: {{model: web/gpt-test}}
"""
    assert doctor(tmp_path, config, online=True) == 1
    assert (
        f"error: provider 'web' at {openai.url} answered, but not as a model API: "
        "the answer is not a JSON object: <html>"
    ) in capsys.readouterr().out.splitlines()


def test_without_online_no_provider_is_called(tmp_path, capsys, servers: Servers):
    openai, _ = servers
    config = f"""
providers: [{{name: good, type: openai, api_base: "{openai.base_url}", api_key: sk-good}}]
agent: {{model: good/gpt-test}}
"""
    assert doctor(tmp_path, config) == 0  # a parser without --online
    assert doctor(tmp_path, config, online=False) == 0
    assert openai.requests == []
    assert "provider 'good'" not in capsys.readouterr().out


def test_the_online_flag_of_the_command_line_reaches_the_doctor(tmp_path, capsys, servers: Servers):
    openai, _ = servers
    path = tmp_path / "config.yaml"
    path.write_text(
        f"""
providers: [{{name: good, type: openai, api_base: "{openai.base_url}", api_key: sk-good}}]
agent: {{model: good/gpt-test}}
"""
    )
    flags = ["--config", str(path), "--home", str(tmp_path / "home"), "--cwd", str(tmp_path)]
    assert main(["doctor", "--online", *flags]) == 0
    assert f"provider 'good' at {openai.url} is reachable and accepted the key" in (
        capsys.readouterr().out
    )
    assert len(openai.requests) == 1


def test_online_without_providers_says_the_offline_model_needs_no_network(tmp_path, capsys):
    assert doctor(tmp_path, "agent: {model: offline/default}\n", online=True) == 0
    assert "ok: no providers configured; the offline model needs no network" in (
        capsys.readouterr().out.splitlines()
    )
