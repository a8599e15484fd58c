"""`notes import` and `notes export` on any root: each note a journaled save through the
store's rules, unchanged notes left alone, refusals listed, nothing deleted, nothing written
outside the folder named."""

from __future__ import annotations

from pathlib import Path

import pytest
from memory.notes_kit import Run, notes_runner


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    return notes_runner(tmp_path, capsys)


def _folder(tmp_path: Path) -> Path:
    src = tmp_path / "team-notes"
    (src / "infra").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "infra" / "deploy.md").write_text("Rotate the deploy keys monthly.\n")
    (src / "db.md").write_text("The staging database: password: hunter22\n")
    (src / ".hidden.md").write_text("not a note\n")
    (src / "logo.png").write_bytes(b"\x89PNG")
    return src


def test_import_saves_each_note_through_the_stores_rules_and_journals_it(
    run: Run, tmp_path: Path
) -> None:
    src = _folder(tmp_path)
    code, out, err = run("import", "global:", str(src))
    assert (code, err) == (0, "")
    assert out == "imported 2 notes into global: 2 new, 0 updated, 0 unchanged\n"
    root = tmp_path / "h" / "memory"
    assert (root / "empty").is_dir() and not (root / ".hidden.md").exists()
    assert not (root / "logo.png").exists()
    shown = run("show", "global:db.md")[1]
    assert "hunter22" not in shown and "[REDACTED:password]" in shown
    log = run("log", "global:infra/deploy.md")[1]
    assert "create" in log


def test_import_again_skips_unchanged_notes_updates_changed_ones_and_deletes_nothing(
    run: Run, tmp_path: Path
) -> None:
    src = _folder(tmp_path)
    run("import", "global:", str(src))
    run("write", "global:mine.md", stdin="My own note.\n")
    (src / "infra" / "deploy.md").write_text("Rotate the deploy keys weekly.\n")
    code, out, _ = run("import", "global:", str(src))
    assert code == 0
    assert out == "imported 1 note into global: 0 new, 1 updated, 1 unchanged\n"
    assert (tmp_path / "h" / "memory" / "mine.md").exists()
    assert "weekly" in run("show", "global:infra/deploy.md")[1]


def test_import_lists_a_refused_note_and_goes_on(run: Run, tmp_path: Path) -> None:
    src = _folder(tmp_path)
    (src / "huge.md").write_text("x" * 20_000)
    code, out, err = run("import", "global:team", str(src))
    assert code == 1
    assert err.startswith("acp-memory notes: global:team/huge.md not imported: ")
    assert err.count("\n") == 1
    assert out == "imported 2 notes into global:team/: 2 new, 0 updated, 0 unchanged, 1 refused\n"
    assert (tmp_path / "h" / "memory" / "team" / "infra" / "deploy.md").exists()


def test_import_takes_the_cwds_memory_folder_by_default(run: Run, tmp_path: Path) -> None:
    (tmp_path / "w" / "memory").mkdir(parents=True)
    (tmp_path / "w" / "memory" / "a.md").write_text("A note of the project.\n")
    code, out, _ = run("import", "global:from-project")
    assert code == 0
    assert out == "imported 1 note into global:from-project/: 1 new, 0 updated, 0 unchanged\n"


def test_export_writes_every_note_as_a_file_and_deletes_nothing(
    run: Run, tmp_path: Path
) -> None:
    run("import", "global:", str(_folder(tmp_path)))
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "keep.md").write_text("already here\n")
    code, out, _ = run("export", "global:", str(dest))
    assert code == 0
    assert out == f"exported 2 notes from global to {dest}: 2 new, 0 replaced, 0 unchanged\n"
    assert (dest / "infra" / "deploy.md").read_text() == "Rotate the deploy keys monthly.\n"
    assert (dest / "keep.md").read_text() == "already here\n"
    code, out, _ = run("export", "global:", str(dest))
    assert out == f"exported 0 notes from global to {dest}: 0 new, 0 replaced, 2 unchanged\n"


def test_export_never_writes_outside_the_folder_through_a_link(
    run: Run, tmp_path: Path
) -> None:
    run("import", "global:", str(_folder(tmp_path)))
    dest, outside = tmp_path / "out", tmp_path / "outside"
    dest.mkdir()
    outside.mkdir()
    (dest / "infra").symlink_to(outside)
    code, _, err = run("export", "global:", str(dest))
    assert code == 1
    assert "global:infra/deploy.md not exported: " in err and "outside" in err
    assert list(outside.iterdir()) == []
