"""Issue 27's team, for real: two homes and two clones of one repository (the same origin
remote) on one PostgreSQL server, each member's `acp-memory` processes started as a person
starts them (`acp` agents, `http`, `notes`), and the database read directly to check what
they left there."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import anyio
import httpx
import pytest
from acp import text_block
from harness import subprocess_agent
from memory.writer_child import body_for, is_whole
from runtime.test_memory_run import memory_updates
from shared.team_kit import (
    BOUND_S,
    KEY,
    PASSWORD,
    Member,
    blob,
    env_for_children,
    history_of,
    http_process,
    note_row,
    sha,
    sql,
    team,
    watching,
)

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

WRITER = Path(__file__).with_name("team_writer.py")


def assert_no_password(*texts: str | bytes, homes: tuple[Member, ...] = ()) -> None:
    """The DSN's password is in no output and in no file under a member's home."""
    for text in texts:
        data = text.encode() if isinstance(text, str) else text
        assert PASSWORD.encode() not in data
    for m in homes:
        for path in m.home.rglob("*"):
            if path.is_file():
                assert PASSWORD.encode() not in path.read_bytes(), path


def chained(history: list[tuple[int, str, str | None, str | None]]) -> None:
    """Every change starts from the state the one before it left: none was lost or made
    from a stale read."""
    for (_, _, _, after), (seq, _, before, _) in pairwise(history):
        assert before == after, f"change {seq} did not start where the one before it ended"


# -- 1. a save in one member's agent, recalled in the other's next turn ---------------------


async def test_a_note_one_members_agent_saves_is_recalled_in_the_others_next_turn(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = team(tmp_path, pg_dsn, monkeypatch)
    fact = "Remember that for this project the staging database is called quokkadb."
    async with subprocess_agent(alice.home, cwd=alice.cwd) as ed:
        sid = await ed.start_session(alice.cwd)
        with anyio.fail_after(BOUND_S):
            answer = await ed.conn.prompt(session_id=sid, prompt=[text_block(fact)])
        assert answer.stop_reason == "end_turn"
        assert memory_updates(ed)[-1]["status"] == "finished", ed.stderr.decode()
        alice_log = ed.stderr
    # On the team's server, not in Alice's clone.
    saved = sql(pg_dsn, "SELECT path FROM {S}.notes WHERE project = %s AND body LIKE %s",
                KEY, "%quokkadb%")
    assert len(saved) == 1, alice_log.decode()
    assert not (alice.cwd / "memory").exists()
    async with subprocess_agent(bob.home, cwd=bob.cwd) as ed:
        sid = await ed.start_session(bob.cwd)
        question = "What is the staging database of this project called?"
        with anyio.fail_after(BOUND_S):
            answer = await ed.conn.prompt(session_id=sid, prompt=[text_block(question)])
        said = ed.client.text(sid)
        bob_log = ed.stderr
    assert "From memory:" in said and "quokkadb" in said, said
    assert_no_password(alice_log, bob_log, homes=(alice, bob))


# -- 2. two writers, one note: nothing lost --------------------------------------------------


def start_writer(
    m: Member, writer: int, count: int, path: str, *die_at: int
) -> subprocess.Popen[str]:
    """team_writer.py in m's home and clone, connected and waiting for `go`."""
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(m.home), str(m.cwd), str(writer), str(count), path,
         *map(str, die_at)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env_for_children(),
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def go(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


def test_two_members_saving_one_note_200_times_each_lose_no_change(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = team(tmp_path, pg_dsn, monkeypatch)
    writers = [start_writer(m, w, 200, "project:race.md") for w, m in ((1, alice), (2, bob))]
    for proc in writers:  # both are connected and ready: start them together
        go(proc)
    for proc in writers:
        assert proc.wait(timeout=300) == 0
    history = history_of(pg_dsn, "race.md")
    assert len(history) == 400
    assert [action for _, action, _, _ in history] == ["create"] + ["update"] * 399
    chained(history)
    row = note_row(pg_dsn, "race.md")
    assert row is not None
    body, digest = row
    assert history[-1][3] == f"note:{digest}" and sha(body) == digest and is_whole(body)
    # Each member's local copy is the server's note, and each sees the whole history.
    for m in (alice, bob):
        assert m.show("project:race.md") == body
    done = bob.notes("log", "project:race.md", "--json", "--limit", "0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('"id": "chg_') == 400


# -- 3. kill -9 of a writer mid-change ---------------------------------------------------------


def test_a_writer_killed_mid_change_leaves_the_note_and_its_history_consistent(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = team(tmp_path, pg_dsn, monkeypatch)
    rng = random.Random(27)
    reported = 0  # saves a writer said were done before it was killed
    rounds = 4
    for round_ in range(rounds):
        m = (alice, bob)[round_ % 2]
        proc = start_writer(m, round_, 10_000, "project:crash.md")
        go(proc)
        assert proc.stdout is not None
        for _ in range(rng.randint(1, 30)):  # killed at a random point in its saves
            assert proc.stdout.readline().startswith("saved")
            reported += 1
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        proc.stdout.close()
        assert proc.stdin is not None
        proc.stdin.close()
    history = history_of(pg_dsn, "crash.md")
    # Every save reported is there; at most one per kill committed without being reported.
    assert reported <= len(history) <= reported + rounds
    chained(history)
    for _, _, _, after in history:
        assert after is not None and is_whole(blob(pg_dsn, after).decode())
    row = note_row(pg_dsn, "crash.md")
    assert row is not None
    body, digest = row
    assert history[-1][3] == f"note:{digest}" and sha(body) == digest
    # Both local copies, the killed writers' own included, hold what the server holds.
    for m in (alice, bob):
        assert m.show("project:crash.md") == body
    # No lock of a dead writer is left behind: the next save goes through.
    alice.write("project:crash.md", "after the kills\n")
    assert note_row(pg_dsn, "crash.md") == ("after the kills\n", sha("after the kills\n"))
    assert len(history_of(pg_dsn, "crash.md")) == len(history) + 1


def test_a_writer_killed_as_it_commits_leaves_no_trace_on_the_server_or_in_its_copy(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The one moment a crash could split the two: the server never got the new text, so the
    # writer's own copy must not hold it either (the copy only ever lags the server).
    alice, _ = team(tmp_path, pg_dsn, monkeypatch)
    proc = start_writer(alice, 1, 5, "project:crash.md", 2)
    go(proc)
    assert proc.stdout is not None
    assert [proc.stdout.readline() for _ in range(2)] == ["saved 0\n", "saved 1\n"]
    assert proc.wait(timeout=BOUND_S) == -signal.SIGKILL
    proc.stdout.close()
    assert len(history_of(pg_dsn, "crash.md")) == 2
    kept = body_for(1, 1)
    assert note_row(pg_dsn, "crash.md") == (kept, sha(kept))
    # Alice's next processes read, and change, what the server holds.
    assert alice.show("project:crash.md") == kept
    alice.write("project:crash.md", "after the kill\n")
    assert note_row(pg_dsn, "crash.md") == ("after the kill\n", sha("after the kill\n"))


# -- 4. the server stopped and started under a running process ------------------------------


async def test_a_server_outage_mid_session_searches_the_copy_refuses_writes_and_recovers(
    tmp_path: Path, pg_server, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = team(tmp_path, pg_dsn, monkeypatch)
    await anyio.to_thread.run_sync(
        alice.write, "project:runbook.md", "The quokka runbook: restart the queue first.\n")
    async with http_process(bob.home, bob.cwd) as server, httpx.AsyncClient(
        base_url=server.url, timeout=BOUND_S
    ) as client:
        sid = (await client.post("/coddy/sessions", json={"cwd": str(bob.cwd)})).json()["id"]
        memory = f"/coddy/sessions/{sid}/memory"
        search = {"q": "quokka runbook", "root": "workspace"}
        found = (await client.get(f"{memory}/search", params=search)).json()
        assert [h["path"] for h in found["hits"]] == ["runbook.md"] and "offline" not in found
        note = {"root": "workspace", "path": "outage.md", "content": "Written in the outage.\n"}
        stopped = False
        try:
            await anyio.to_thread.run_sync(pg_server.stop)
            stopped = True
            offline = (await client.get(f"{memory}/search", params=search)).json()
            assert [h["path"] for h in offline["hits"]] == ["runbook.md"]
            assert offline["offline"].startswith("shared memory offline: synced ")
            refused = await client.put(f"{memory}/file", json=note)
            assert refused.status_code == 400
            message = refused.json()["error"]["message"]
            assert "\n" not in message
            assert "cannot connect" in message and "nothing was written" in message
            assert not (bob.copy / "outage.md").exists()
        finally:
            if stopped:
                await anyio.to_thread.run_sync(pg_server.start)
        # The pool reconnects by itself: the same write goes through now.
        written = await client.put(f"{memory}/file", json=note)
        assert written.status_code == 200, written.text
        assert note_row(pg_dsn, "outage.md") == (note["content"], sha(note["content"]))
        # And the copy catches up with what the team writes after the outage, unasked.
        with watching(bob.copy) as until:
            await anyio.to_thread.run_sync(
                alice.write, "project:after.md", "The quokka queue moved to Fridays.\n")
            await until(lambda: (bob.copy / "after.md").exists())
        back = (await client.get(f"{memory}/search", params={"q": "quokka fridays"})).json()
        assert "after.md" in [h["path"] for h in back["hits"]] and "offline" not in back
    # The session was told once, its DSN masked.
    (told,) = [line for line in server.stderr.splitlines() if "cannot connect" in line]
    assert told.endswith("; searching the local copy, writes refused")
    assert "shared project memory postgresql://postgres:***@/" in told
    assert_no_password(server.stderr, homes=(alice, bob))


# -- 5. undo across the team -----------------------------------------------------------------


def test_one_member_undoes_the_others_change(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = team(tmp_path, pg_dsn, monkeypatch)
    alice.write("project:deploy.md", "Deploy on Tuesdays.\n")
    alice.write("project:deploy.md", "Deploy on Fridays.\n")
    log = bob.notes("log", "project:deploy.md", "--json")
    assert log.returncode == 0, log.stderr
    changes = json.loads(log.stdout)
    assert [c["action"] for c in changes] == ["update", "create"]
    assert {(c["root"], c["shared"]) for c in changes} == {("project", KEY)}
    undo = bob.notes("undo", changes[0]["id"], "-y")
    assert undo.returncode == 0, undo.stderr
    assert undo.stdout.startswith(f"undid {changes[0]['id']}: restored project:deploy.md")
    assert note_row(pg_dsn, "deploy.md") == ("Deploy on Tuesdays.\n", sha("Deploy on Tuesdays.\n"))
    assert alice.show("project:deploy.md") == "Deploy on Tuesdays.\n"
    newest = json.loads(alice.notes("log", "project:deploy.md", "--json").stdout)[0]
    assert (newest["action"], newest["undoes"]) == ("undo", changes[0]["id"])


# -- 6. LISTEN/NOTIFY freshness ------------------------------------------------------------


async def test_a_running_process_gets_a_teammates_save_pushed_before_it_searches(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = team(tmp_path, pg_dsn, monkeypatch)
    await anyio.to_thread.run_sync(alice.write, "project:seed.md", "A seed note.\n")
    async with http_process(bob.home, bob.cwd) as server, httpx.AsyncClient(
        base_url=server.url, timeout=BOUND_S
    ) as client:
        sid = (await client.post("/coddy/sessions", json={"cwd": str(bob.cwd)})).json()["id"]
        memory = f"/coddy/sessions/{sid}/memory"
        found = (await client.get(f"{memory}/search", params={"q": "seed"})).json()
        assert [h["path"] for h in found["hits"]] == ["seed.md"]  # Bob's copy is in step
        fact = "The quokka deploy window is Tuesday morning.\n"
        with watching(bob.copy) as until:
            await anyio.to_thread.run_sync(alice.write, "project:fresh.md", fact)
            # Nobody asks Bob's server anything meanwhile: its copy gets the note by itself.
            await until(lambda: (bob.copy / "fresh.md").exists())
        assert (bob.copy / "fresh.md").read_text() == fact
        hits = (await client.get(f"{memory}/search", params={"q": "quokka deploy"})).json()
        assert [h["path"] for h in hits["hits"]] == ["fresh.md"]
    assert_no_password(server.stderr, homes=(alice, bob))
