"""`--help` tells a newcomer what each command does and where everything lives by default."""

from __future__ import annotations

import argparse

import pytest

from acp_memory.cli_parser import (
    ACP_DESCRIPTION,
    DEMO_DESCRIPTION,
    DOCTOR_DESCRIPTION,
    HTTP_DESCRIPTION,
    build_parser,
)


def _flat(text: str) -> str:
    # argparse wraps to the terminal's width; the words are what matter.
    return " ".join(text.split())


def _subcommand(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert isinstance(sub.choices, dict)
    parser = sub.choices[name]
    assert isinstance(parser, argparse.ArgumentParser)
    return parser


@pytest.mark.parametrize(
    "default",
    [
        "home --home, else $ACP_MEMORY_HOME, else ~/.acp-memory",
        "config <home>/config.yaml",
        "sessions <home>/sessions",
        "log file <home>/logs/acp-memory.log, written when logging.to_file is true",
        "cwd the working directory (--cwd names another); project notes in <cwd>/memory",
    ],
)
def test_the_top_level_help_gives_each_default(default):
    assert default in _flat(build_parser().format_help())


def test_the_defaults_keep_their_own_lines_in_the_top_level_help():
    lines = build_parser().format_help().splitlines()
    assert "  config     <home>/config.yaml (--config names another file)" in lines


@pytest.mark.parametrize(
    ("name", "description"),
    [
        ("acp", ACP_DESCRIPTION),
        ("demo", DEMO_DESCRIPTION),
        ("http", HTTP_DESCRIPTION),
        ("doctor", DOCTOR_DESCRIPTION),
    ],
)
def test_each_subcommand_help_describes_it(name, description):
    assert _flat(description) in _flat(_subcommand(name).format_help())


def test_http_help_names_its_address_and_token_flags():
    help_text = _flat(_subcommand("http").format_help())
    for flag in ("--host", "--port", "--auth-token"):
        assert flag in help_text
    assert "required off loopback" in help_text


def test_doctor_help_explains_online():
    help_text = _flat(_subcommand("doctor").format_help())
    assert (
        "--online also make one tiny request per configured provider to check reachability "
        "and the key" in help_text
    )
