"""The names MCP tools get: mcp__<server>__<tool>, within what providers accept."""

from __future__ import annotations

import hashlib
import re

from acp_memory.mcpclient.names import tool_name


def test_characters_outside_the_allowed_set_become_underscores():
    assert tool_name("my server.v2", "do/thing-1") == "mcp__my_server_v2__do_thing-1"
    assert tool_name("ü", "ok_Z9") == "mcp_____ok_Z9"  # mcp__ + _ + __


def test_a_name_past_64_characters_is_cut_and_ends_with_a_hash_of_the_whole():
    whole = "mcp__" + "s" * 30 + "__" + "t" * 40
    name = tool_name("s" * 30, "t" * 40)
    assert len(name) == 64
    assert name == whole[:57] + "_" + hashlib.sha256(whole.encode()).hexdigest()[:6]
    # Two long names alike in their first 57 characters still differ.
    assert tool_name("s" * 30, "t" * 40 + "x") != name
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name)


def test_a_name_of_exactly_64_characters_is_kept_whole():
    tool = "t" * (64 - len("mcp__s__"))
    assert tool_name("s", tool) == f"mcp__s__{tool}"
