"""The modes come from one place: every surface and the tool policy know the same three."""

from __future__ import annotations

from acp_memory.modes import MODE_LABELS, MODES, unknown_mode
from acp_memory.tools.registry import MODE_TOOLS


def test_every_mode_has_a_label_and_a_tool_policy():
    assert MODES == ("agent", "plan", "ask")
    assert tuple(MODE_LABELS) == MODES
    assert tuple(MODE_TOOLS) == MODES


def test_an_unknown_mode_is_refused_naming_the_known_ones():
    assert unknown_mode("chat") == "unknown mode 'chat'; use agent, plan or ask"
