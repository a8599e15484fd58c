"""`doctor` on memory.shared: the DSN masked, the key or why there is none; with --online the
server, database, schema version and the key's notes; a password never in its output."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from gitrepo import git_repo

from acp_memory.doctor import run_doctor
from acp_memory.memory.shared.schema import SCHEMA_VERSION

PASSWORD = "s3cret-pw"
ORIGIN = "git@github.com:Org/Repo.git"


def _clone(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "repo", ORIGIN)


def _doctor(tmp_path: Path, cwd: Path, dsn: str, capsys: pytest.CaptureFixture[str],
            online: bool = False) -> tuple[int, str]:
    config = tmp_path / "config.yaml"
    config.write_text(f'memory:\n  enable: true\n  shared:\n    dsn: "{dsn}"\n')
    args = argparse.Namespace(home=str(tmp_path / "home"), config=str(config),
                              sessions_dir=None, cwd=str(cwd), online=online)
    code = run_doctor(args)
    return code, capsys.readouterr().out


def test_doctor_names_the_dsn_masked_and_the_project_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = f"postgresql://alice:{PASSWORD}@db.example.com/team?sslmode=require"
    code, out = _doctor(tmp_path, _clone(tmp_path), dsn, capsys)
    assert code == 0, out
    assert ("ok: memory.shared: postgresql://alice:***@db.example.com/team: the project "
            f"scope of {tmp_path / 'repo'} is project (shared: github.com/org/repo)") in out
    assert PASSWORD not in out


def test_doctor_says_why_a_cwd_has_no_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    _, out = _doctor(tmp_path, plain, "postgresql://alice@localhost/team", capsys)
    said = [line for line in out.splitlines() if "no project key" in line]
    assert len(said) == 1 and said[0].startswith("warning: memory.shared: ")
    assert "not in a git repository" in said[0] and "stays on disk" in said[0]


def test_doctor_warns_of_an_unset_dsn_variable_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ACP_MEMORY_PG", raising=False)
    _, out = _doctor(tmp_path, tmp_path, "${ACP_MEMORY_PG}", capsys)
    said = [line for line in out.splitlines() if "memory.shared" in line]
    assert said == ["warning: memory.shared.dsn: ${ACP_MEMORY_PG} is not set; shared project "
                    "memory is off"]


def test_doctor_online_names_server_database_schema_and_the_keys_notes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pg_dsn: str
) -> None:
    import psycopg

    from acp_memory.memory.shared.schema import ensure_schema

    with psycopg.connect(pg_dsn) as conn:
        ensure_schema(conn)
        rows = [("github.com/org/repo", "a.md", "A"), ("github.com/org/repo", "b/c.md", "C"),
                ("github.com/org/repo", "b", None), ("github.com/org/other", "d.md", "D")]
        for project, path, body in rows:
            conn.execute("INSERT INTO acp_memory.notes VALUES (%s, %s, %s, %s, now(), 'test')",
                         (project, path, body, None if body is None else "0" * 64))
        conn.commit()
        database = conn.execute("SELECT current_database()").fetchone()[0]
    code, out = _doctor(tmp_path, _clone(tmp_path), f"{pg_dsn}&password={PASSWORD}", capsys,
                        online=True)
    assert code == 0, out
    line = next(line for line in out.splitlines() if "is reachable: PostgreSQL" in line)
    assert line.startswith("ok: memory.shared: postgresql://postgres:***@/")
    assert line.endswith(f"database {database}, schema version {SCHEMA_VERSION}; "
                         "project github.com/org/repo holds 2 notes")
    assert PASSWORD not in out


def test_doctor_online_with_the_server_unreachable_is_one_error_without_the_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = tmp_path / "no-server"
    gone.mkdir()
    dsn = f"postgresql://alice:{PASSWORD}@/team?host={gone}"
    code, out = _doctor(tmp_path, _clone(tmp_path), dsn, capsys, online=True)
    assert code == 1
    said = [line for line in out.splitlines() if "cannot connect" in line]
    assert len(said) == 1
    assert said[0].startswith(f"error: shared project memory postgresql://alice:***@/team"
                              f"?host={gone}: cannot connect: ")
    assert PASSWORD not in out
