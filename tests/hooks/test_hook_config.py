"""The `hooks:` block: Claude Code's shape loads as it is; mistakes name their key."""

from __future__ import annotations

from pathlib import Path

import pytest
from hookkit import group, hooks

from acp_memory.config import ConfigError
from acp_memory.config.loader import parse_config, unknown_keys
from acp_memory.hooks.table import HookTable, project_hooks

CLAUDE_CODE_BLOCK = {
    "PreToolUse": [
        {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "lint.sh"}]},
    ],
    "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}],
}


def test_a_pasted_claude_code_block_loads_and_an_event_we_lack_is_a_doctor_finding():
    cfg = parse_config({"hooks": CLAUDE_CODE_BLOCK}, Path("config.yaml"))
    (hook,) = cfg.hooks.PreToolUse[0].hooks
    assert (hook.command, hook.timeout) == ("lint.sh", 60)
    assert unknown_keys(cfg) == ["hooks.Notification"]


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ({"matcher": "(unclosed", "hooks": []}, "hooks.PreToolUse.0.matcher"),
        ({"hooks": [{"type": "prompt", "command": "x"}]}, "hooks.PreToolUse.0.hooks.0.type"),
        ({"hooks": [{"command": "x", "timeout": 0}]}, "hooks.PreToolUse.0.hooks.0.timeout"),
    ],
)
def test_a_bad_hook_entry_is_an_error_naming_its_key(entry, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        parse_config({"hooks": {"PreToolUse": [entry]}}, Path("config.yaml"))


def test_matchers_match_the_whole_tool_name_and_each_command_runs_once():
    table = HookTable(
        (
            hooks(PreToolUse=[group("a", matcher="write_file|edit_file"), group("b", "a")]),
            hooks(PreToolUse=[group("a", "c", matcher="write")]),
        )
    )
    assert [h.command for h in table.commands("PreToolUse", "write_file")] == ["a", "b"]
    assert [h.command for h in table.commands("PreToolUse", "write")] == ["b", "a", "c"]
    assert [h.command for h in table.commands("Stop")] == []
    assert not HookTable((hooks(),))


def test_a_broken_project_file_is_ignored_with_a_warning_naming_it(tmp_path, caplog):
    folder = tmp_path / ".acp-memory"
    folder.mkdir()
    (folder / "hooks.yaml").write_text("hooks:\n  Stop: [{matcher: '('}]\n")
    assert project_hooks(tmp_path) is None
    assert str(folder / "hooks.yaml") in caplog.text and "Stop.0.matcher" in caplog.text
    assert project_hooks(tmp_path / "elsewhere") is None  # no file: nothing to say
