"""memory.shared at start: an unset ${VAR} is one warning naming it, a DSN that does not parse
is the one-line config error, a remote host without sslmode=require one warning; no password
in any of them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PASSWORD = "s3cret-pw"


def _print_mode(tmp_path: Path, config: str, env: dict[str, str] | None = None
                ) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text(config)
    environ = {**os.environ, "ACP_MEMORY_HOME": str(home), **(env or {})}
    environ.pop("ACP_MEMORY_PG", None)
    return subprocess.run(
        [sys.executable, "-m", "acp_memory", "-p", "hi", "--cwd", str(tmp_path)],
        capture_output=True, text=True, env=environ, timeout=60,
    )


def test_a_dsn_whose_variable_is_unset_is_one_warning_naming_it(tmp_path: Path) -> None:
    done = _print_mode(tmp_path, 'memory:\n  shared:\n    dsn: "${ACP_MEMORY_PG}"\n')
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "memory.shared" in line]
    assert said == ["acp-memory: config: memory.shared.dsn: ${ACP_MEMORY_PG} is not set; "
                    "shared project memory is off"]


def test_a_dsn_that_does_not_parse_is_a_one_line_config_error(tmp_path: Path) -> None:
    done = _print_mode(tmp_path, "memory:\n  shared:\n    dsn: "
                       f'"host=db.example.com password={PASSWORD} bogus"\n')
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"acp-memory: {tmp_path / 'home' / 'config.yaml'}: "
                                  "memory.shared.dsn ")
    assert "is not a PostgreSQL DSN" in done.stderr
    assert PASSWORD not in done.stderr


def test_a_remote_host_without_sslmode_require_is_one_warning_without_the_password(
    tmp_path: Path,
) -> None:
    dsn = f"postgresql://alice:{PASSWORD}@db.example.com:5432/team"
    done = _print_mode(tmp_path, f'memory:\n  shared:\n    dsn: "{dsn}"\n')
    said = [line for line in done.stderr.splitlines() if "sslmode" in line]
    assert said == [
        "acp-memory: config: memory.shared.dsn postgresql://alice:***@db.example.com:5432/team "
        "reaches db.example.com with sslmode=prefer: the notes and the password may cross the "
        "network unencrypted; add ?sslmode=require (or verify-full)"
    ]
    assert PASSWORD not in done.stderr + done.stdout
