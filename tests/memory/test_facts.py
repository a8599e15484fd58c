"""Facts with a date and a check against the code: what memory_search and memory_read say of a
note (last change, its age and source, the cited paths gone), the read stamps of memory runs,
and `acp-memory notes stale`."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from acp_memory.cli import main
from acp_memory.config.models import MemoryConfig
from acp_memory.memory import cites
from acp_memory.memory.facts import hits_facts
from acp_memory.memory.history.journal import Journal
from acp_memory.memory.history.records import ChangeSource
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore
from acp_memory.memory.tools import came_back_empty, memory_tools
from acp_memory.timestamps import iso
from acp_memory.tools.base import Tool, ToolContext, ToolResult

CTX = ToolContext(session_id="sess_test", cwd=Path("/"), mode="agent")
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
RUN = ChangeSource("memory_run", "sess_parent", "bg_1", "What do we deploy with?")
CLI = ChangeSource("cli")


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    journal = Journal(tmp_path / "home" / "history" / "journal.sqlite3", now=lambda: NOW)
    yield journal
    journal.close()


def store_for(tmp_path: Path, cwd: Path, journal: Journal,
              source: ChangeSource = CLI) -> MemoryStore:
    roots = Roots(tmp_path / "home" / "memory", cwd / "memory", cwd=cwd)
    return MemoryStore(roots, tmp_path / "home" / "cache", journal=journal, source=source)


@pytest.fixture
def store(tmp_path: Path, cwd: Path, journal: Journal) -> Iterator[MemoryStore]:
    with store_for(tmp_path, cwd, journal) as store:
        yield store


def tools_of(store: MemoryStore) -> dict[str, Tool]:
    return {t.name: t for t in memory_tools(store, MemoryConfig(max_search_hits=5))}


async def call(store: MemoryStore, name: str, **args: object) -> ToolResult:
    result = await tools_of(store)[name].run(args, CTX)
    assert not result.is_error, result.text
    return result


def hand_written(path: Path, text: str, when: datetime) -> None:
    """A note someone wrote outside acp-memory, with its file time at `when`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (when.timestamp(), when.timestamp()))


def inside(path: str, folder: Path) -> bool:
    real = os.path.realpath(folder)
    return path == real or path.startswith(real + "/")


# -- the facts in the tool results ---------------------------------------------------------


@pytest.mark.anyio
async def test_a_cited_path_that_is_gone_is_flagged_and_one_that_exists_is_not(store) -> None:
    store.write("project:deploy.md",
                "Deploys start in `src/api/server.py` and [the old one](src/old.py).\n")
    read = await call(store, "memory_read", path="project:deploy.md")
    head, text = read.text.split("\n\n", 1)
    assert head == ("changed 2026-12-02, today, by cli\n"
                    "cites src/old.py: not in the workspace")
    assert text == "Deploys start in `src/api/server.py` and [the old one](src/old.py).\n"
    found = await call(store, "memory_search", query="deploys", scope="both")
    assert "[1] project:deploy.md (score " in found.text
    hit = found.text.split("[1] project:deploy.md (score ", 1)[1].split("\n")
    assert hit[1:3] == ["changed 2026-12-02, today, by cli",
                        "cites src/old.py: not in the workspace"]
    assert hit[3].startswith("Deploys start in")
    assert "server.py: not in the workspace" not in found.text + read.text
    assert not came_back_empty(found.text)


@pytest.mark.anyio
async def test_a_path_outside_the_cwd_is_never_probed(store, cwd, tmp_path, monkeypatch) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (cwd / "out").symlink_to(outside)
    probed: list[str] = []
    real_lstat = os.lstat

    def recording_lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if sys._getframe(1).f_globals.get("__name__") == cites.__name__:
            probed.append(os.fspath(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(cites.os, "lstat", recording_lstat)
    store.write("global:far.md", "See `/etc/hostname`, `out/secret.txt`, `../x/y.py`, "
                                 "https://x/y and `src/gone.py`.\n")
    read = await call(store, "memory_read", path="global:far.md")
    await call(store, "memory_search", query="hostname", scope="both")
    assert probed and all(inside(p, cwd) for p in probed), probed
    assert not [p for p in probed if ".." in p.split("/")]  # nor up out of it by `..`
    assert not [p for p in probed if p.endswith("secret.txt")]
    # Only the gone path inside the cwd is flagged: what could not be checked is not.
    assert [line for line in read.text.split("\n\n")[0].splitlines()[1:]] == [
        "cites src/gone.py: not in the workspace"
    ]


@pytest.mark.anyio
async def test_at_most_50_cited_paths_of_a_note_are_checked(store, monkeypatch) -> None:
    store.write("project:many.md", "".join(f"See `src/gone{i}.py`.\n" for i in range(80)))
    probed: list[str] = []
    real_lstat = os.lstat
    monkeypatch.setattr(cites.os, "lstat", lambda p: probed.append(p) or real_lstat(p))
    read = await call(store, "memory_read", path="project:many.md")
    flagged = [ln for ln in read.text.split("\n\n", 1)[0].splitlines()
               if ln.startswith("cites ")]
    assert flagged == [f"cites src/gone{i}.py: not in the workspace" for i in range(50)]
    gone = sorted({p.rsplit("/", 1)[1] for p in probed if "/src/gone" in p})
    assert gone == sorted(f"gone{i}.py" for i in range(50))  # the 30 past it: never probed


@pytest.mark.parametrize(
    ("ago", "words"),
    [
        (timedelta(hours=3), "changed 2026-12-02, today, by hand edit"),
        (timedelta(days=1), "changed 2026-12-01, 1 day ago, by hand edit"),
        (timedelta(days=12), "changed 2026-11-20, 12 days ago, by hand edit"),
        (timedelta(days=90), "changed 2026-09-03, 3 months ago, by hand edit"),
        (timedelta(days=91), "changed 2026-09-02, 3 months ago, by hand edit (old)"),
        (timedelta(days=275), "changed 2026-03-02, 9 months ago, by hand edit (old)"),
    ],
)
@pytest.mark.anyio
async def test_the_age_reads_today_days_or_months_and_old_past_90_days(
    store, ago, words
) -> None:
    hand_written(store.roots.global_root / "tea.md", "Green tea.\n", NOW - ago)
    read = await call(store, "memory_read", path="global:tea.md")
    assert read.text == f"{words}\n\nGreen tea.\n"
    found = await call(store, "memory_search", query="tea", scope="global")
    assert f"\n{words}\nGreen tea." in found.text


@pytest.mark.anyio
async def test_the_source_is_the_surface_of_the_last_change_or_a_hand_edit(
    tmp_path, cwd, journal
) -> None:
    with store_for(tmp_path, cwd, journal, RUN) as run:
        await call(run, "memory_save", title="Deploy", body="We deploy with make.",
                   scope="global")
        read = await call(run, "memory_read", path="global:deploy.md")
        assert read.text == "changed 2026-12-02, today, by memory_run\n\nWe deploy with make."
        # Edited outside acp-memory: the file's own time, by hand edit.
        note = run.roots.global_root / "deploy.md"
        hand_written(note, "We deploy with just.", NOW - timedelta(days=40))
        read = await call(run, "memory_read", path="global:deploy.md")
        assert read.text == (
            "changed 2026-10-23, 40 days ago, by hand edit\n\nWe deploy with just."
        )


def test_a_date_with_slashes_is_no_cited_path() -> None:
    assert cites.cited_paths("Since 2026/03/02 (`2026/03/02`) we use `src/a.py`.") == [
        "src/a.py"]


@pytest.mark.anyio
async def test_a_note_a_folder_undo_brought_back_is_by_that_undo(
    store, tmp_path, cwd, journal
) -> None:
    from acp_memory.memory.history.undo import undo

    with store_for(tmp_path, cwd, journal, RUN) as run:
        run.write("global:infra/db.md", "postgres\n")
    store.delete("global:infra")
    assert store.journal is not None
    undo(store, store.journal.changes([store.roots.global_root], limit=1)[0].id)
    read = await call(store, "memory_read", path="global:infra/db.md")
    assert read.text == "changed 2026-12-02, today, by cli\n\npostgres\n"


@pytest.mark.anyio
async def test_an_empty_note_still_gets_its_facts(store) -> None:
    hand_written(store.roots.global_root / "blank.md", "\n", NOW)
    read = await call(store, "memory_read", path="global:blank.md")
    assert read.text == (
        "changed 2026-12-02, today, by hand edit\n\nglobal:blank.md is an empty note."
    )


@pytest.mark.anyio
async def test_a_searchs_hits_get_the_facts_each_alone_gets_from_one_journal_query(
    store, tmp_path, cwd, journal
) -> None:
    from acp_memory.memory.history.undo import undo

    # The notes of the tests above: a gone citation, a memory run's note, a hand edit over
    # a journaled note, an old hand-written one, a note a folder undo brought back.
    store.write("project:deploy.md", "Deploy notes: `src/api/server.py`, [old](src/old.py).\n")
    with store_for(tmp_path, cwd, journal, RUN) as run:
        run.write("global:make.md", "Deploy notes: we deploy with make.\n")
        run.write("global:infra/db.md", "Deploy notes: postgres.\n")
    store.write("global:just.md", "Deploy notes: make.\n")
    hand_written(store.roots.global_root / "just.md", "Deploy notes: just.\n",
                 NOW - timedelta(days=40))
    hand_written(store.roots.global_root / "tea.md", "Deploy notes: green tea.\n",
                 NOW - timedelta(days=275))
    store.delete("global:infra")
    undo(store, journal.changes([store.roots.global_root], limit=1)[0].id)
    facts = {
        "project:deploy.md": ["changed 2026-12-02, today, by cli",
                              "cites src/old.py: not in the workspace"],
        "global:make.md": ["changed 2026-12-02, today, by memory_run"],
        "global:just.md": ["changed 2026-10-23, 40 days ago, by hand edit"],
        "global:tea.md": ["changed 2026-03-02, 9 months ago, by hand edit (old)"],
        "global:infra/db.md": ["changed 2026-12-02, today, by cli"],
    }
    for path, lines in facts.items():  # each alone, as memory_read gives them
        read = await call(store, "memory_read", path=path)
        assert read.text.split("\n\n", 1)[0].splitlines() == lines
    statements: list[str] = []
    with journal.use() as db:
        db.set_trace_callback(statements.append)
    found = await call(store, "memory_search", query="deploy notes", scope="both")
    with journal.use() as db:
        db.set_trace_callback(None)
    assert len(statements) == 1, statements
    for path, lines in facts.items():
        hit = found.text.split(f"] {path} (score ", 1)[1].split("\n")
        assert hit[1:1 + len(lines)] == lines, (path, hit)
        assert hit[1 + len(lines)].startswith("Deploy notes:")


def test_a_searchs_hits_resolve_each_root_once(store, monkeypatch) -> None:
    paths = [f"{scope}:n{i}.md" for scope in ("global", "project") for i in range(4)]
    for path in paths:
        store.write(path, "A note.\n")
    roots = {store.roots.global_root, store.roots.project_root}
    resolved: list[Path] = []
    real_resolve = Path.resolve

    def recording_resolve(self: Path, strict: bool = False) -> Path:
        if self in roots:
            resolved.append(self)
        return real_resolve(self, strict)

    monkeypatch.setattr(Path, "resolve", recording_resolve)
    facts = hits_facts(store, paths)
    assert facts == {path: ["changed 2026-12-02, today, by cli"] for path in paths}
    assert sorted(resolved) == sorted(roots)  # each once, however many hits it has


# -- read stamps ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_memory_runs_read_is_stamped_and_a_cli_read_or_a_search_is_not(
    tmp_path, cwd, journal
) -> None:
    with store_for(tmp_path, cwd, journal) as cli:
        cli.write("global:a.md", "Alpha notes.\n")
        cli.write("global:b.md", "Beta notes.\n")
        note = cli.roots.global_root / "a.md"
        before = (note.read_bytes(), note.stat().st_mtime_ns)
        await call(cli, "memory_read", path="global:b.md")
        cli.read("global:b.md")  # `notes show`
    with store_for(tmp_path, cwd, journal, RUN) as run:
        await call(run, "memory_search", query="notes", scope="global")
        await call(run, "memory_read", path="global:a.md")
    # Stamped when the run's store closes.
    assert journal.reads(run.roots.global_root) == {"a.md": "2026-12-02T12:00:00.000Z"}
    # Nothing is written into the note.
    assert (note.read_bytes(), note.stat().st_mtime_ns) == before


@pytest.mark.anyio
async def test_a_memory_runs_reads_are_stamped_when_it_ends_in_one_unsynced_transaction(
    tmp_path, cwd, journal
) -> None:
    with store_for(tmp_path, cwd, journal) as cli:
        for name in ("a", "b", "c"):
            cli.write(f"global:{name}.md", f"{name} notes.\n")
    statements: list[str] = []
    with journal.use() as db:
        db.set_trace_callback(statements.append)
    with store_for(tmp_path, cwd, journal, RUN) as run:
        for name in ("a", "b", "c", "a"):
            await call(run, "memory_read", path=f"global:{name}.md")
        assert journal.reads(run.roots.global_root) == {}  # nothing written mid-run
    with journal.use() as db:
        db.set_trace_callback(None)
    stamp = "2026-12-02T12:00:00.000Z"
    assert journal.reads(run.roots.global_root) == {"a.md": stamp, "b.md": stamp, "c.md": stamp}
    writes = [s for s in statements if not s.startswith("SELECT")]
    assert writes[:2] == ["PRAGMA synchronous=NORMAL", "BEGIN IMMEDIATE"], writes
    assert writes.count("COMMIT") == 1, writes


# -- notes stale ---------------------------------------------------------------------------


@pytest.fixture
def notes(tmp_path: Path, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    home, work = tmp_path / "h", tmp_path / "w"
    (work / "src").mkdir(parents=True)
    (work / "src" / "here.py").write_text("x = 1\n")

    def run(*argv: str) -> tuple[int, str, str]:
        old = sys.stdin
        sys.stdin = io.StringIO("")
        try:
            code = main(["notes", *argv, "--home", str(home), "--cwd", str(work),
                         "--log-level", "warning"])
        finally:
            sys.stdin = old
        out, err = capsys.readouterr()
        return code, out, err

    return home, work, run


def test_notes_stale_lists_gone_citations_and_notes_no_recall_read_in_n_days(notes) -> None:
    home, work, run = notes
    now = datetime.now(UTC)
    hand_written(work / "memory" / "api.md", "The API is in `src/gone.py`, next to `src/here.py`.",
                 now)
    hand_written(home / "memory" / "old.md", "Never read since.", now - timedelta(days=100))
    hand_written(home / "memory" / "read.md", "Read a while ago.", now - timedelta(days=300))
    hand_written(home / "memory" / "fresh.md", "Read yesterday.", now - timedelta(days=300))
    for rel, ago in (("read.md", 100), ("fresh.md", 1)):
        stamps = Journal(home / "history" / "journal.sqlite3")
        stamps.mark_reads([((home / "memory").absolute(), rel, iso(now - timedelta(days=ago)))])
        stamps.close()

    code, out, err = run("stale")
    assert code == 0 and err == ""
    assert out.splitlines() == [
        "global:old.md: never read by a recall, changed 100 days ago",
        "global:read.md: not read by a recall in 100 days",
        "project:api.md: cites src/gone.py: not in the workspace",
    ]
    code, out, _ = run("stale", "--days", "150", "--json")
    listed = json.loads(out)
    assert code == 0 and [(n["root"], n["path"]) for n in listed] == [("project", "api.md")]
    (api,) = listed
    assert set(api) == {"root", "path", "reasons", "lastRead", "changed", "missing"}
    assert api["missing"] == ["src/gone.py"] and api["lastRead"] is None
    assert api["reasons"] == ["cites src/gone.py: not in the workspace"]
    assert api["changed"].endswith("Z")
    # Listing deletes nothing.
    assert sorted(p.name for p in (home / "memory").iterdir()) == ["fresh.md", "old.md",
                                                                   "read.md"]


def test_notes_stale_says_so_in_one_line_when_nothing_is_stale(notes) -> None:
    home, _, run = notes
    hand_written(home / "memory" / "ok.md", "Cites `src/here.py`.", datetime.now(UTC))
    code, out, _ = run("stale")
    assert code == 0 and out.startswith("no stale notes") and len(out.splitlines()) == 1
    assert run("stale", "--json")[1] == "[]\n"
    code, _, err = run("stale", "--days", "0")
    assert code == 2 and "--days must be at least 1" in err
