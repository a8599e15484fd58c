"""`acp-memory notes ...` through the real argument parser, with the tools' safeguards."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from acp_memory.cli import main


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    def runner(*argv: str, stdin: str = "") -> tuple[int, str, str]:
        old = sys.stdin
        sys.stdin = io.StringIO(stdin)
        try:
            code = main(["notes", *argv, "--home", str(tmp_path / "h"), "--cwd",
                         str(tmp_path / "w")])
        finally:
            sys.stdin = old
        out, err = capsys.readouterr()
        return code, out, err

    return runner


def seed(tmp_path: Path) -> None:
    root = tmp_path / "h" / "memory"
    (root / "infra").mkdir(parents=True)
    (root / "infra" / "deploy.md").write_text("Rotate the deploy keys monthly.")
    (tmp_path / "w" / "memory").mkdir(parents=True)
    (tmp_path / "w" / "memory" / "cats.md").write_text("Кошки спят днём.")


def test_list_shows_both_roots_and_one_folder(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    seed(tmp_path)
    code, out, _ = run("list")
    assert code == 0 and "global:infra/" in out and "project:cats.md" in out
    code, out, _ = run("list", "global:infra")
    assert "global:infra/deploy.md" in out


def test_search_json_and_batch_mode(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    seed(tmp_path)
    code, out, _ = run("search", "rotating keys", "--json")
    (hit,) = json.loads(out)
    assert code == 0 and hit["path"] == "global:infra/deploy.md"
    assert set(hit) == {"path", "score", "snippet"}
    code, out, _ = run("search", "-", "--scope", "project", "--limit", "1",
                       stdin="кошка\nnothing at all\n")
    lines = out.splitlines()
    assert [len(json.loads(line)) for line in lines] == [1, 0]
    assert json.loads(lines[0])[0]["path"] == "project:cats.md"


def test_show_and_rm_follow_the_same_rules(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    seed(tmp_path)
    assert run("show", "global:infra/deploy.md")[1] == "Rotate the deploy keys monthly."
    code, _, err = run("show", "global:../../etc/passwd")
    assert code == 1 and "'..'" in err
    code, _, err = run("rm", "global:")
    assert code == 1 and "never deleted" in err
    code, out, _ = run("rm", "global:infra")
    assert code == 0 and "deleted global:infra/" in out
    assert not (tmp_path / "h" / "memory" / "infra").exists()


def test_edit_goes_through_redaction_and_the_size_limit(
    run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    seed(tmp_path)
    script = tmp_path / "fake-editor.py"
    script.write_text(
        "import sys; p = sys.argv[1]; t = open(p).read()\n"
        "open(p, 'w').write(t + '\\npassword: hunter22\\n')\n"
    )
    monkeypatch.setenv("VISUAL", f"{sys.executable} {script}")
    code, out, _ = run("edit", "global:infra/deploy.md")
    assert code == 0 and out.startswith("updated global:infra/deploy.md")
    text = (tmp_path / "h" / "memory" / "infra" / "deploy.md").read_text()
    assert "hunter22" not in text and "[REDACTED:password]" in text
    big = tmp_path / "big-editor.py"
    big.write_text("import sys; open(sys.argv[1], 'w').write('x' * 20000)\n")
    monkeypatch.setenv("VISUAL", f"{sys.executable} {big}")
    code, _, err = run("edit", "global:infra/deploy.md")
    assert code == 1 and "over the limit" in err and "kept in" in err
    assert (tmp_path / "h" / "memory" / "infra" / "deploy.md").read_text() == text


def test_edit_never_overwrites_a_change_made_while_the_editor_was_open(
    run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    seed(tmp_path)
    note = tmp_path / "h" / "memory" / "infra" / "deploy.md"
    script = tmp_path / "racing-editor.py"
    script.write_text(
        "import sys\n"
        f"open({str(note)!r}, 'w').write('saved by the memory agent meanwhile')\n"
        "open(sys.argv[1], 'w').write('my edit')\n"
    )
    monkeypatch.setenv("VISUAL", f"{sys.executable} {script}")
    code, _, err = run("edit", "global:infra/deploy.md")
    assert code == 1 and "changed by someone else" in err and "kept in" in err
    assert note.read_text() == "saved by the memory agent meanwhile"


def test_edit_refuses_a_bad_path_before_starting_the_editor(
    run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    marker = tmp_path / "editor-ran"
    script = tmp_path / "editor.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    monkeypatch.setenv("VISUAL", f"{sys.executable} {script}")
    code, _, err = run("edit", "global:notes.json")
    assert code == 1 and "not a note path" in err
    assert not marker.exists()
