from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from pydantic import BaseModel

from acp_memory.config import ConfigError, load_config, resolve_paths
from acp_memory.config.loader import MAX_CONFIG_BYTES, parse_config, read_raw, unknown_keys
from acp_memory.config.models import Config
from acp_memory.llm.registry import api_key, resolve_provider

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
    assert cfg.model_ids() == ["openai/gpt-4.1-mini"]


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


# -- with no config file, the keys in the environment pick the model ------------------------


@pytest.mark.parametrize(
    ("keys", "model"),
    [
        ({}, "offline/default"),
        ({"OPENAI_API_KEY": "sk-o"}, "openai/gpt-4.1-mini"),
        ({"ANTHROPIC_API_KEY": "sk-a"}, "anthropic/claude-sonnet-4-5"),
        ({"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"}, "openai/gpt-4.1-mini"),
    ],
)
def test_with_no_config_file_a_key_in_the_environment_picks_its_model(
    tmp_path, monkeypatch, keys, model
):
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    paths = _paths(tmp_path, None)
    cfg = load_config(paths)
    assert (cfg.default_model_id(), cfg.model_ids()) == (model, [model])
    assert cfg.memory.enable is True
    # Its provider is configured, with the key the environment holds (no network here).
    provider = resolve_provider(cfg, model)
    assert provider.name == model.partition("/")[0]
    assert api_key(provider) == keys.get(f"{provider.type.upper()}_API_KEY", "")
    note = cfg.take_no_file_note()
    assert note.startswith(f"no config file at {paths.config_file}: sessions run on {model} (")
    assert cfg.take_no_file_note() == ""  # said once


def test_with_no_config_file_a_key_in_the_home_env_file_picks_openai(tmp_path):
    paths = _paths(tmp_path, None)
    (paths.home / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv\n")
    assert load_config(paths).default_model_id() == "openai/gpt-4.1-mini"


def test_a_config_file_keeps_its_own_model_whatever_the_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-o")
    cfg = load_config(_paths(tmp_path, "memory: {enable: true}\n"))
    assert cfg.default_model_id() == "offline/default"
    assert cfg.take_no_file_note() == ""


@pytest.mark.parametrize(
    ("keys", "model"),
    [
        ({}, "offline/default"),
        ({"OPENAI_API_KEY": "sk-o"}, "openai/gpt-4.1-mini"),
        ({"ANTHROPIC_API_KEY": "sk-a"}, "anthropic/claude-sonnet-4-5"),
        ({"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"}, "openai/gpt-4.1-mini"),
    ],
)
def test_agent_model_auto_picks_as_a_run_with_no_config_file_does(
    tmp_path, monkeypatch, keys, model
):
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    # The file lists another model and no provider: the chosen one's is made all the same.
    cfg = load_config(_paths(tmp_path, "agent: {model: auto}\nmodels: [{model: offline/x}]\n"))
    assert cfg.default_model_id() == model
    assert cfg.model_ids() == ["offline/x", model]
    provider = resolve_provider(cfg, model)
    assert provider.name == model.partition("/")[0]
    assert api_key(provider) == keys.get(f"{provider.type.upper()}_API_KEY", "")
    assert cfg.take_no_file_note() == ""


def test_agent_model_auto_keeps_the_files_own_provider_of_that_name(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-o")
    text = "agent: {model: auto}\nproviders: [{name: openai, type: openai, api_base: 'http://p'}]\n"
    cfg = load_config(_paths(tmp_path, text))
    assert [(p.name, p.api_base) for p in cfg.providers] == [("openai", "http://p")]
    assert cfg.default_model_id() == "openai/gpt-4.1-mini"


def test_the_example_config_picks_its_model_automatically(monkeypatch):
    example = Path(__file__).resolve().parents[2] / "config.example.yaml"
    raw = read_raw(example) or {}
    assert raw["agent"]["model"] == "auto"
    assert parse_config(raw, example).default_model_id() == "offline/default"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-o")
    assert parse_config(raw, example).default_model_id() == "openai/gpt-4.1-mini"


def test_the_demo_runs_offline_whatever_the_keys(tmp_path, monkeypatch):
    from acp_memory.demo import _prepare

    monkeypatch.setenv("OPENAI_API_KEY", "sk-o")
    args = argparse.Namespace(home=str(tmp_path / "demo"), cwd=None, sessions_dir=None,
                              log_level=None)
    assert _prepare(args).cfg.default_model_id() == "offline/default"


# -- the model selector -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "ids"),
    [
        ({}, ["offline/default"]),
        ({"models": [{"model": "openai/a"}, {"model": "openai/b"}]}, ["openai/a", "openai/b"]),
        ({"models": [{"model": "openai/a"}, {"model": "offline/default"}]},
         ["openai/a", "offline/default"]),
        ({"models": [{"model": "openai/a"}], "agent": {"model": "openai/b"}},
         ["openai/a", "openai/b"]),
    ],
)
def test_the_selectable_models_are_exactly_the_configured_ones(config, ids):
    cfg = Config.model_validate(config)
    assert cfg.model_ids() == ids
    assert cfg.default_model_id() in ids


# -- one line for every bad file ----------------------------------------------------------


def test_a_yaml_error_is_one_line_naming_where(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(_paths(tmp_path, "agent: {max_turns: 3\nmemory: [\n"))
    line = str(err.value)
    assert "\n" not in line and "<unicode string>" not in line
    assert line == (
        f"{tmp_path / 'home' / 'config.yaml'}: not valid YAML at line 2, column 7: "
        "expected ',' or '}', but got ':'"
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("memory: 5\n", "memory: must be a mapping of keys (key: value), not 5"),
        ("hooks: {Stop: [3]}\n", "hooks.Stop.0: must be a mapping of keys (key: value), not 3"),
    ],
)
def test_a_section_given_as_a_scalar_is_named_without_a_class_name(tmp_path, text, says):
    with pytest.raises(ConfigError) as err:
        load_config(_paths(tmp_path, text))
    assert str(err.value).endswith(says)
    assert "Config" not in str(err.value) and "HookMatcher" not in str(err.value)


def test_a_file_that_is_not_utf8_is_one_line_naming_it(tmp_path):
    paths = _paths(tmp_path, None)
    paths.config_file.write_bytes(b"agent: {model: caf\xe9}\n")
    with pytest.raises(ConfigError, match=r"config\.yaml: not UTF-8 text"):
        load_config(paths)


def test_off_and_warn_are_read_as_the_user_meant_them(tmp_path):
    cfg = load_config(_paths(tmp_path, "acp: {memory_run_updates: off}\nlogging: {level: warn}\n"))
    assert (cfg.acp.memory_run_updates, cfg.logging.level) == ("off", "warning")


def test_every_key_that_takes_off_reads_an_unquoted_off_as_off(tmp_path):
    written = "memory: {review: off, project_root_symlinks: off}\n"
    memory = load_config(_paths(tmp_path, written)).memory
    assert (memory.review, memory.project_root_symlinks) == ("off", "refuse")


@pytest.mark.parametrize(("written", "level"), [("WARN", "warning"), ("Info", "info")])
def test_the_log_level_in_the_config_takes_any_case_as_the_flag_does(tmp_path, written, level):
    cfg = load_config(_paths(tmp_path, f"logging: {{level: {written}}}\n"))
    assert cfg.logging.level == level


# -- bounds: size, aliases, depth ---------------------------------------------------------


def _bomb(levels: int, width: int) -> str:
    """The billion laughs: each level a list of `width` aliases of the level before."""
    lines = ['l0: &l0 "lol"']
    for n in range(1, levels):
        lines.append(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_within_the_alias_bound_loads_each_shared_node_once(tmp_path):
    # 9 levels of 9: about 4*10^7 leaves if every alias were walked again; 72 aliases.
    cfg = load_config(_paths(tmp_path, _bomb(9, 9)))
    top = (cfg.model_extra or {})["l8"]
    assert len(top) == 9 and top[0] is top[8]  # expanded once, shared as YAML shared it


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("providers: *l8", "providers.0: must be a mapping of keys (key: value), not [["),
        ("memory: *l8", "memory: must be a mapping of keys (key: value), not [["),
        ("tools: {command_allowlist: *l8}", "tools.command_allowlist.0: Input should be"),
    ],
)
def test_an_alias_bomb_where_a_section_belongs_is_one_line_naming_the_key(
    tmp_path, where, says
):
    # The error names the key and shows the start of the value, never the whole of it: 9^9
    # leaves under 82 aliases.
    with pytest.raises(ConfigError) as err:
        load_config(_paths(tmp_path, _bomb(10, 9) + where.replace("l8", "l9") + "\n"))
    line = str(err.value)
    assert says in line and "\n" not in line and len(line) < 1000, line


def test_an_expanded_variable_is_shared_by_every_alias_of_its_node(tmp_path, monkeypatch):
    monkeypatch.setenv("WHO", "lol")
    cfg = load_config(_paths(tmp_path, 'a: &a ["${WHO}"]\nb: [*a, *a]\n'))
    b = (cfg.model_extra or {})["b"]
    assert b == [["lol"], ["lol"]] and b[0] is b[1]


def test_more_than_100_aliases_are_refused_in_one_line(tmp_path):
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * 101) + "]\n"
    with pytest.raises(ConfigError) as err:
        load_config(_paths(tmp_path, text))
    assert str(err.value).endswith(
        "config.yaml: more than 100 YAML aliases (*a at line 2); a config file may use at most 100"
    )
    load_config(_paths(tmp_path, "a: &a 1\nb: [" + ", ".join(["*a"] * 100) + "]\n"))


@pytest.mark.parametrize("levels", [51, 100_000])
def test_nesting_deeper_than_50_levels_is_refused_in_one_line(tmp_path, levels):
    # The top mapping is the first level; `x: [[...]]` adds one per bracket.
    text = "x: " + "[" * (levels - 1) + "]" * (levels - 1) + "\n"
    with pytest.raises(ConfigError) as err:
        load_config(_paths(tmp_path, text))
    assert str(err.value).endswith(
        "config.yaml: nested deeper than 50 levels (line 1); a config file may nest at most 50"
    )


def test_fifty_levels_load(tmp_path):
    cfg = load_config(_paths(tmp_path, "x: " + "[" * 49 + "]" * 49 + "\n"))
    assert "x" in (cfg.model_extra or {})


def test_aliases_count_as_deep_as_the_node_they_name(tmp_path):
    deep = "[" * 30 + "]" * 30
    text = f"a: &a {deep}\nb: {'[' * 30}*a{']' * 30}\n"
    with pytest.raises(ConfigError, match="nested deeper than 50 levels"):
        load_config(_paths(tmp_path, text))


def test_an_alias_inside_its_own_node_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"the YAML alias \*a at line 1 is inside the node"):
        load_config(_paths(tmp_path, "a: &a [1, *a]\n"))


def test_a_file_over_1_mib_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(_paths(tmp_path, "#" * MAX_CONFIG_BYTES + "\n"))
    assert str(err.value).endswith(
        "config.yaml: larger than 1 MiB; a config file is at most 1 MiB (1048576 bytes)"
    )
    load_config(_paths(tmp_path, "#" * (MAX_CONFIG_BYTES - 1) + "\n"))


def test_a_file_over_1_mib_whose_bound_cuts_a_character_is_refused_as_too_large(tmp_path):
    # The bound falls inside a two-byte character: the file is too large, not badly encoded.
    with pytest.raises(ConfigError, match=r"config\.yaml: larger than 1 MiB"):
        load_config(_paths(tmp_path, "# " + "é" * (MAX_CONFIG_BYTES // 2) + "\n"))
