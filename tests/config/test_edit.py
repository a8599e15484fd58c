"""config/edit.py: one section's keys set in place, every other byte of the file kept."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_memory.config import edit
from acp_memory.config.edit import ConfigEditError, set_keys

EXAMPLE = Path(__file__).parents[2] / "config.example.yaml"


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line[0] + line[2:]
        for line in difflib.ndiff(before.splitlines(), after.splitlines())
        if line[:1] in "+-"
    ]


def test_a_changed_value_is_the_only_change_in_the_commented_example():
    text = EXAMPLE.read_text()
    edited = set_keys(text, "memory", {"wait_seconds": 5, "enable": True, "keep_runs": 20})
    assert changed_lines(text, edited) == [
        "-  wait_seconds: 20              # how long a turn waits for the report before its "
        "first model call",
        "+  wait_seconds: 5              # how long a turn waits for the report before its "
        "first model call",
    ]


def test_values_asked_as_they_are_keep_their_var_references_and_quoting():
    text = "memory:\n  model: '${MEMORY_MODEL}'   # from the environment\n  wait_seconds: 20\n"
    edited = set_keys(text, "memory", {"model": "${MEMORY_MODEL}", "wait_seconds": 3})
    assert edited == (
        "memory:\n  model: '${MEMORY_MODEL}'   # from the environment\n  wait_seconds: 3\n"
    )
    assert set_keys(edited, "memory", {"wait_seconds": 3.0}) == edited


def test_a_boolean_asked_where_the_file_has_a_number_is_written():
    # YAML's 1 is not true: left as it is, the file would keep saying something else.
    assert set_keys("memory:\n  enable: 1\n", "memory", {"enable": True}) == (
        "memory:\n  enable: true\n"
    )


def test_a_missing_key_is_added_at_the_indentation_of_its_section():
    text = "memory:\n    enable: true  # on\n\nagent:\n    max_turns: 5\n"
    edited = set_keys(text, "memory", {"wait_seconds": 7, "model": "openai/gpt-4.1-mini"})
    assert edited == (
        "memory:\n    enable: true  # on\n    wait_seconds: 7\n    model: openai/gpt-4.1-mini\n"
        "\nagent:\n    max_turns: 5\n"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "memory:\n  enable: true\n"),
        ("# nothing yet\n", "# nothing yet\nmemory:\n  enable: true\n"),
        ("agent: {max_turns: 5}", "agent: {max_turns: 5}\nmemory:\n  enable: true\n"),
        ("memory:\nagent: {}\n", "memory:\n  enable: true\nagent: {}\n"),
        ("memory: null  # later\n", "memory:   # later\n  enable: true\n"),
    ],
)
def test_a_missing_or_empty_section_gets_the_keys_as_a_block(text, expected):
    assert set_keys(text, "memory", {"enable": True}) == expected


def test_a_flow_section_stays_in_flow_style():
    text = "memory: {enable: true, wait_seconds: 20}  # short form\n"
    edited = set_keys(
        text, "memory", {"wait_seconds": 2.5, "additional_prompt": "two\nlines", "keep_runs": 0}
    )
    assert edited == (
        'memory: {enable: true, wait_seconds: 2.5, additional_prompt: "two\\nlines", '
        "keep_runs: 0}  # short form\n"
    )
    assert set_keys("memory: {}\n", "memory", {"enable": True}) == "memory: {enable: true}\n"


def test_a_multi_line_prompt_is_a_literal_block_and_the_comment_moves_to_its_header():
    text = 'memory:\n  additional_prompt: ""   # for the memory subagent\n  keep_runs: 20\n'
    prompt = "Only deal with the notes.\n  Indented: kept.\nЗаметки по-русски.\n"
    edited = set_keys(text, "memory", {"additional_prompt": prompt})
    assert edited == (
        "memory:\n  additional_prompt: |   # for the memory subagent\n"
        "    Only deal with the notes.\n      Indented: kept.\n    Заметки по-русски.\n"
        "  keep_runs: 20\n"
    )
    assert yaml.safe_load(edited)["memory"]["additional_prompt"] == prompt


@pytest.mark.parametrize(
    ("prompt", "written"),
    [
        # A first line that starts with a space says the indentation in the header.
        ("  indented first\nsecond\n", "|2\n      indented first\n    second\n"),
        # No final line break: the block strips the one it would otherwise add.
        ("no break\nat the end", "|-\n    no break\n    at the end\n"),
        # Several final line breaks: a block cannot say them exactly, a quoted string can.
        ("two breaks\n\n", '"two breaks\\n\\n"\n'),
    ],
)
def test_a_literal_block_says_the_text_exactly_or_the_string_is_quoted(prompt, written):
    edited = set_keys('memory:\n  additional_prompt: ""\n', "memory", {"additional_prompt": prompt})
    assert edited == f"memory:\n  additional_prompt: {written}"
    assert yaml.safe_load(edited)["memory"]["additional_prompt"] == prompt


def test_lists_keep_the_style_of_the_list_they_replace():
    flow = set_keys("memory:\n  fallback_models: []\n", "memory", {"fallback_models": ["a/b", "c"]})
    block_text = "memory:\n  fallback_models:\n    - a/b   # first\n    - c/d\n  keep_runs: 1\n"
    block = set_keys(block_text, "memory", {"fallback_models": ["x/y", "true"]})
    emptied = set_keys(block_text, "memory", {"fallback_models": []})
    assert flow == "memory:\n  fallback_models: [a/b, c]\n"
    assert block == 'memory:\n  fallback_models:\n    - x/y\n    - "true"\n  keep_runs: 1\n'
    assert yaml.safe_load(emptied)["memory"] == {"fallback_models": [], "keep_runs": 1}


@pytest.mark.parametrize("value", ["", "true", "20", "${X}", "a: b", " padded", "# not a comment"])
def test_strings_yaml_would_read_otherwise_are_quoted(value):
    edited = set_keys("memory:\n  model: x\n", "memory", {"model": value})
    assert yaml.safe_load(edited)["memory"]["model"] == value
    assert edited != f"memory:\n  model: {value}\n"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("memory: 3\n", "memory is not a mapping"),
        ("- a\n- b\n", "top level must be a mapping"),
        ("memory: [unclosed\n", "not valid YAML"),
        ("memory: {a: 1}\nmemory: 2\n", "memory is not a mapping"),
    ],
)
def test_a_file_that_cannot_be_edited_is_refused_naming_why(text, says):
    with pytest.raises(ConfigEditError, match=says):
        set_keys(text, "memory", {"enable": True})


def test_a_number_yaml_cannot_hold_is_refused_naming_it():
    with pytest.raises(ConfigEditError, match="inf is not a number a config file can hold"):
        set_keys("memory:\n  wait_seconds: 20\n", "memory", {"wait_seconds": float("inf")})


def test_an_edit_that_would_not_read_back_is_refused(monkeypatch):
    merged = "base: &base {wait_seconds: 1}\nmemory:\n  <<: *base\n"
    with pytest.raises(ConfigEditError, match=r"memory\.wait_seconds: the edited file would not"):
        set_keys(merged, "memory", {"wait_seconds": 5})
    monkeypatch.setattr(edit, "_scalar", lambda value: '"not it"')  # a renderer gone wrong
    with pytest.raises(ConfigEditError, match=r"memory\.keep_runs: the edited file would not"):
        set_keys("memory:\n  keep_runs: 1\n", "memory", {"keep_runs": 2})


SAMPLE = (
    "# keep me\nproviders:\n  - {name: offline, type: offline}   # offline\n"
    "memory:\n  enable: true\n  model: ''\n  additional_prompt: \"\"  # c\n"
    "\nagent: {max_turns: 3}\n"
)
values = st.one_of(
    st.text(max_size=40),
    st.lists(st.text(max_size=12), max_size=3),
    st.integers(-(10**9), 10**9),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(["model", "additional_prompt", "new_key"]), value=values)
def test_any_value_reads_back_as_written_and_the_rest_is_untouched(key, value):
    edited = set_keys(SAMPLE, "memory", {key: value})
    data = yaml.safe_load(edited)
    assert data["memory"][key] == value
    assert data["agent"] == {"max_turns": 3} and data["providers"][0]["name"] == "offline"
    assert edited.startswith("# keep me\nproviders:\n  - {name: offline, type: offline}   # off")
    assert edited.endswith("\n\nagent: {max_turns: 3}\n")
