from __future__ import annotations

import json

import pytest

from acp_memory import atomic


def test_a_write_replaces_the_file_and_leaves_no_temporary_behind(tmp_path):
    target = tmp_path / "deep" / "session.json"
    atomic.write_json_atomic(target, {"v": 1})
    atomic.write_json_atomic(target, {"v": 2, "text": "ünïcode"})
    assert json.loads(target.read_text(encoding="utf-8")) == {"v": 2, "text": "ünïcode"}
    assert [p.name for p in target.parent.iterdir()] == ["session.json"]


def test_a_failed_write_keeps_the_old_content(tmp_path, monkeypatch):
    target = tmp_path / "messages.json"
    atomic.write_atomic(target, b"old")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", broken_replace)
    with pytest.raises(OSError):
        atomic.write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["messages.json"]
