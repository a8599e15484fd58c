from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import BaseModel

from acp_memory.config import ConfigError, load_config, resolve_paths
from acp_memory.config.loader import unknown_keys
from acp_memory.config.models import Config

SEED_MEMORY_DEFAULTS = {
    "enable": False,
    "model": "",
    "fallback_models": [],
    "dir": "",
    "wait_seconds": 20,
    "timeout_seconds": 300,
    "keep_runs": 20,
    "recall_max_turns": 6,
    "persist_max_turns": 12,
    "copilot_max_tokens": 4096,
    "max_search_hits": 8,
    "additional_prompt": "",
    "additional_prompt_max_chars": 0,
}


def _paths(tmp_path: Path, text: str | None):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if text is not None:
        (home / "config.yaml").write_text(text)
    return resolve_paths(home=str(home), cwd=str(tmp_path))


def test_every_memory_key_of_the_seed_has_its_default():
    memory = Config().memory.model_dump()
    for key, value in SEED_MEMORY_DEFAULTS.items():
        assert memory[key] == value, key


def test_design_defaults_for_the_other_sections():
    cfg = Config()
    assert cfg.tools.permission_mode == "ask"
    assert cfg.tools.background.model_dump() == {
        "enabled": True,
        "max_concurrent": 5,
        "default_timeout_seconds": 900,
        "max_timeout_seconds": 3600,
    }
    assert cfg.subagents.max_concurrent == 4
    assert cfg.acp.memory_run_updates == "session_update"
    assert cfg.default_model_id() == "offline/default"


def test_no_config_file_means_defaults_with_memory_on(tmp_path):
    cfg = load_config(_paths(tmp_path, None))
    assert cfg.memory.enable is True
    assert cfg.default_model_id() == "offline/default"


def test_an_empty_config_file_leaves_memory_off(tmp_path):
    assert load_config(_paths(tmp_path, "")).memory.enable is False


REPO = Path(__file__).resolve().parents[2]
# The two facts above, in the words both documents use.
MEMORY_ENABLE_STATEMENT = "defaults to false; a run with no config file at all turns memory on"


def _words(text: str) -> str:
    return " ".join(text.replace("#", " ").replace("`", "").split())


def test_the_example_config_says_beside_memory_enable_how_it_defaults():
    lines = (REPO / "config.example.yaml").read_text().splitlines()
    start = lines.index("memory:")
    at = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("enable:"))
    comment = [lines[at].partition("#")[2]]
    # The comment may go on over the following comment-only lines.
    for line in lines[at + 1 :]:
        if not line.lstrip().startswith("#"):
            break
        comment.append(line)
    assert MEMORY_ENABLE_STATEMENT in _words(" ".join(comment))


def test_the_readme_configuration_section_says_how_memory_enable_defaults():
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    assert f"memory.enable {MEMORY_ENABLE_STATEMENT}" in _words(section)


def test_an_explicit_missing_config_file_is_an_error(tmp_path):
    paths = resolve_paths(config=str(tmp_path / "nope.yaml"), home=str(tmp_path))
    with pytest.raises(ConfigError, match=r"nope\.yaml"):
        load_config(paths, explicit=True)


def test_yaml_is_loaded_with_env_vars_and_tilde_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-from-env")
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = load_config(
        _paths(
            tmp_path,
            """
providers:
  - {name: openai, type: openai, api_key: "${MY_KEY}"}
models:
  - {model: openai/gpt-4.1-mini, max_tokens: 1024}
memory:
  enable: true
  dir: ~/notes
  wait_seconds: 0
""",
        )
    )
    assert cfg.providers[0].api_key == "sk-from-env"
    assert cfg.memory.dir == str(tmp_path / "notes")
    assert cfg.memory.enable is True and cfg.memory.wait_seconds == 0
    assert cfg.default_model_id() == "openai/gpt-4.1-mini"
    assert cfg.model_ids() == ["openai/gpt-4.1-mini", "offline/default"]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch):
    """Unset the given variables; whatever a .env sets meanwhile is undone after the test."""

    def unset(*names: str) -> None:
        for name in names:
            # setenv first so that monkeypatch records (and restores) the variable's absence.
            monkeypatch.setenv(name, "")
            monkeypatch.delenv(name)

    return unset


def test_home_env_file_fills_only_unset_variables(tmp_path, monkeypatch, clean_env):
    monkeypatch.setenv("ALREADY", "from-shell")
    clean_env("FROM_DOTENV")
    paths = _paths(
        tmp_path, 'providers:\n  - {name: a, type: openai, api_key: "${FROM_DOTENV}-${ALREADY}"}\n'
    )
    (paths.home / ".env").write_text("FROM_DOTENV=dot\nexport ALREADY='from-file'\n# comment\n")
    cfg = load_config(paths)
    assert cfg.providers[0].api_key == "dot-from-shell"


def test_home_env_file_reads_comments_quotes_and_escapes_as_dotenv_does(tmp_path, clean_env):
    names = ["PLAIN", "INLINE", "HASH_IN_DOUBLE", "HASH_IN_SINGLE", "ESCAPED", "RAW", "EXPORTED"]
    clean_env(*names)
    paths = _paths(tmp_path, None)
    (paths.home / ".env").write_text(
        "# a whole-line comment\n"
        "PLAIN=sk-plain\n"
        "INLINE=sk-inline   # the key for the staging account\n"
        'HASH_IN_DOUBLE="pa#ss word"  # a comment after a quoted value\n'
        "HASH_IN_SINGLE='pa#ss'\n"
        'ESCAPED="line one\\nline \\"two\\""\n'
        "RAW='no \\n escape'\n"
        "export EXPORTED=yes\n"
    )
    load_config(paths)
    assert {name: os.environ[name] for name in names} == {
        "PLAIN": "sk-plain",
        "INLINE": "sk-inline",
        "HASH_IN_DOUBLE": "pa#ss word",
        "HASH_IN_SINGLE": "pa#ss",
        "ESCAPED": 'line one\nline "two"',
        "RAW": "no \\n escape",
        "EXPORTED": "yes",
    }


def test_an_unreadable_env_file_is_a_config_error_naming_it(tmp_path):
    paths = _paths(tmp_path, None)
    (paths.home / ".env").write_bytes(b"KEY=\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"\.env: not UTF-8"):
        load_config(paths)


def test_a_wrong_type_is_an_error_naming_the_key(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(_paths(tmp_path, "memory:\n  keep_runs: lots\n"))
    assert "memory.keep_runs" in str(err.value) and "config.yaml" in str(err.value)


def test_a_bad_enum_value_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"acp\.memory_run_updates"):
        load_config(_paths(tmp_path, "acp: {memory_run_updates: loud}\n"))


def test_unknown_keys_are_kept_for_the_doctor(tmp_path):
    cfg = load_config(
        _paths(
            tmp_path,
            "agent: {modle: x}\nextra: 1\nproviders: [{name: a, type: offline, colour: red}]\n",
        )
    )
    assert sorted(unknown_keys(cfg)) == ["agent.modle", "extra", "providers[0].colour"]


def test_not_yaml_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(_paths(tmp_path, "agent: [unclosed\n"))


def test_home_precedence_flag_then_env_then_default(tmp_path, monkeypatch):
    monkeypatch.setenv("ACP_MEMORY_HOME", str(tmp_path / "envhome"))
    assert resolve_paths(home=str(tmp_path / "flag")).home == tmp_path / "flag"
    assert resolve_paths().home == tmp_path / "envhome"
    monkeypatch.delenv("ACP_MEMORY_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_paths().home == tmp_path / ".acp-memory"


def test_sessions_dir_flag_beats_config_which_beats_home(tmp_path):
    cfg = Config.model_validate({"sessions": {"dir": str(tmp_path / "cfgsessions")}})
    assert resolve_paths(home=str(tmp_path), cfg=cfg).sessions_dir == tmp_path / "cfgsessions"
    assert (
        resolve_paths(home=str(tmp_path), cfg=cfg, sessions_dir=str(tmp_path / "f")).sessions_dir
        == tmp_path / "f"
    )
    assert resolve_paths(home=str(tmp_path)).sessions_dir == tmp_path / "sessions"


def test_config_example_documents_and_parses_every_key():
    example = REPO / "config.example.yaml"
    from acp_memory.config.loader import parse_config, read_raw

    raw = read_raw(example)
    assert raw is not None
    cfg = parse_config(raw, example)
    assert unknown_keys(cfg) == []

    def keys(model, prefix=""):
        for name in type(model).model_fields:
            yield prefix + name
            value = getattr(model, name)
            if isinstance(value, BaseModel):
                yield from keys(value, prefix + name + ".")

    text = example.read_text()
    for key in keys(Config()):
        assert key.rsplit(".", 1)[-1] + ":" in text, f"config.example.yaml does not mention {key}"
