"""Tidy's candidates: the groups of a root's notes a tidy run is handed (near duplicates by
3-word shingles, one subject given two values, cited paths gone), newest first, and the
subject shapes the offline model shares."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from acp_memory.memory.history.journal import Journal
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore, NoteError
from acp_memory.memory.tidy import Group, candidate_groups, candidates
from acp_memory.text.shingles import text_overlap
from acp_memory.text.subjects import statements

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
BUILD = ("The build runs with uv sync and then uv run pytest, the tests live under the unit "
         "folder and the fixtures under the data folder next to them.\n")


@pytest.fixture
def clock() -> list[datetime]:
    return [NOW]


@pytest.fixture
def store(tmp_path: Path, cwd: Path, clock: list[datetime]) -> Iterator[MemoryStore]:
    journal = Journal(tmp_path / "home" / "history" / "journal.sqlite3", now=lambda: clock[0])
    roots = Roots(tmp_path / "home" / "memory", cwd / "memory", cwd=cwd)
    with MemoryStore(roots, tmp_path / "home" / "cache", journal=journal) as store:
        yield store
    journal.close()


def hand_written(path: Path, text: str, when: datetime) -> None:
    """A note written outside acp-memory, its file time at `when`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (when.timestamp(), when.timestamp()))


def changed(text: str, words: int) -> str:
    """text with its first `words` words (of five or more letters) swapped for others."""
    out = text.split(" ")
    picked = [i for i, w in enumerate(out) if len(w) >= 5][:words]
    for n, i in enumerate(picked):
        out[i] = f"other{n}"
    return " ".join(out)


# -- duplicates ----------------------------------------------------------------------------


def test_notes_whose_shingles_overlap_at_least_0_8_are_one_group_newest_first(store, cwd):
    near = BUILD.replace("pytest,", "pytest;")  # punctuation aside, the same words
    close = changed(BUILD, 1)
    assert text_overlap(BUILD, close) >= 0.8
    hand_written(cwd / "memory" / "build.md", BUILD, NOW - timedelta(days=3))
    hand_written(cwd / "memory" / "notes" / "build-again.md", close, NOW - timedelta(days=1))
    hand_written(cwd / "memory" / "same.md", near, NOW - timedelta(days=2))
    groups = candidate_groups(store, "project")
    assert groups == [Group("duplicate", ("project:notes/build-again.md", "project:same.md",
                                          "project:build.md"),
                            "3-word shingles overlap 0.85")]  # 24 of 28: cut, not rounded


def test_notes_under_0_8_overlap_are_no_group(store, cwd):
    far = changed(BUILD, 3)
    assert text_overlap(BUILD, far) < 0.8
    hand_written(cwd / "memory" / "a.md", BUILD, NOW)
    hand_written(cwd / "memory" / "b.md", far, NOW)
    assert candidate_groups(store, "project") == []


def test_a_chain_of_near_duplicates_is_one_group(store, cwd):
    # a and c differ in four words, below 0.8, but each is a near duplicate of b.
    a = [f"word{j}" for j in range(60)]
    b = [f"b{j}" if j in (10, 20) else w for j, w in enumerate(a)]
    c = [f"c{j}" if j in (35, 45) else w for j, w in enumerate(b)]
    a_text, b_text, c_text = (" ".join(words) for words in (a, b, c))
    assert text_overlap(a_text, b_text) >= 0.8 and text_overlap(b_text, c_text) >= 0.8
    assert text_overlap(a_text, c_text) < 0.8
    for name, text, days in (("a.md", a_text, 3), ("b.md", b_text, 2), ("c.md", c_text, 1)):
        hand_written(cwd / "memory" / name, text, NOW - timedelta(days=days))
    [group] = candidate_groups(store, "project")
    assert (group.kind, group.paths) == ("duplicate",
                                         ("project:c.md", "project:b.md", "project:a.md"))
    assert group.why == "3-word shingles overlap 0.81"


def test_duplicates_are_found_without_comparing_every_pair(store, cwd, monkeypatch):
    for i in range(120):
        hand_written(cwd / "memory" / f"n{i:03d}.md",
                     f"Note {i}: " + " ".join(f"w{i}x{j}" for j in range(30)) + "\n", NOW)
    hand_written(cwd / "memory" / "copy.md", "Note 7: " + " ".join(
        f"w7x{j}" for j in range(30)) + "\n", NOW - timedelta(days=1))
    compared: list[int] = []
    real = candidates.overlap

    def counted(a: set[tuple[str, ...]], b: set[tuple[str, ...]]) -> float:
        compared.append(1)
        return real(a, b)

    monkeypatch.setattr(candidates, "overlap", counted)
    [group] = candidate_groups(store, "project")
    assert group.paths == ("project:n007.md", "project:copy.md")
    assert len(compared) < 10  # of 7,260 pairs


def test_the_journal_s_last_change_orders_a_group_before_the_file_time(store, cwd, clock):
    clock[0] = NOW - timedelta(days=5)
    store.write("project:older.md", BUILD)
    clock[0] = NOW
    store.write("project:newer.md", BUILD)
    # The files' times say the opposite; the journal's changes left both as they are.
    os.utime(cwd / "memory" / "newer.md", ((NOW - timedelta(days=9)).timestamp(),) * 2)
    os.utime(cwd / "memory" / "older.md", ((NOW - timedelta(days=1)).timestamp(),) * 2)
    [group] = candidate_groups(store, "project")
    assert group.paths == ("project:newer.md", "project:older.md")
    assert group.why == "3-word shingles overlap 1.00"


@dataclass
class VectorsOf:
    """Embeddings as the index sees them: the key their vectors are stored under."""

    key: str = "fake/model"


def test_with_embeddings_notes_whose_vectors_are_close_are_a_duplicate_group(store, cwd):
    vectors = {"deploy.md": [1.0, 0.0, 0.0], "ship.md": [0.95, 0.2, 0.0],
               "garden.md": [0.0, 1.0, 0.0], "roses.md": [0.0, 0.8, 0.6]}  # 0.8: not close
    hand_written(cwd / "memory" / "deploy.md", "Deploys go out on Fridays after lunch.\n", NOW)
    hand_written(cwd / "memory" / "ship.md", "We ship releases each Friday afternoon.\n",
                 NOW - timedelta(days=1))
    hand_written(cwd / "memory" / "garden.md", "Water the garden twice a week.\n", NOW)
    hand_written(cwd / "memory" / "roses.md", "The roses want water in summer.\n", NOW)
    assert candidate_groups(store, "project") == []  # no words in common
    store.indexes.embeddings = VectorsOf()
    root = cwd / "memory"
    store.indexes.build(root)
    pending = store.indexes.pending_vectors(root, 10)
    store.indexes.store_vectors(root, pending, [vectors[rel] for _, rel, _ in pending])
    assert candidate_groups(store, "project") == [
        Group("duplicate", ("project:deploy.md", "project:ship.md"), "cosine 0.97")]


# -- contradictions ------------------------------------------------------------------------


def test_two_notes_giving_one_subject_two_values_are_a_contradiction(store, cwd):
    hand_written(cwd / "memory" / "deploy.md", "# Deploys\n\nDeploy day is Friday.\n",
                 NOW - timedelta(days=30))
    hand_written(cwd / "memory" / "me.md", "- my deploy days is Tuesday now\n", NOW)
    hand_written(cwd / "memory" / "tools.md", "We use poetry for builds.\n",
                 NOW - timedelta(days=2))
    hand_written(cwd / "memory" / "tools2.md", "we now use uv for builds\n", NOW)
    hand_written(cwd / "memory" / "same.md", "The editor is Helix.\n", NOW)
    hand_written(cwd / "memory" / "same2.md", "My editor is helix.\n", NOW)
    hand_written(cwd / "memory" / "other.md", "The build is slow.\n", NOW)
    assert candidate_groups(store, "project") == [
        Group("contradiction", ("project:me.md", "project:deploy.md"),
              "both say what `deploy day` is"),
        Group("contradiction", ("project:tools2.md", "project:tools.md"),
              "both say what we use for `builds`"),
    ]


def test_the_subject_shapes_skip_denials_pointers_and_descriptions():
    assert [(s.subject, s.value) for s in statements(
        "My deploy day is Friday. The API_KEY is rotated weekly.\n"
        "* [x] We use uv for builds\n"
        "It is Friday. Everything is fine. The build is not slow. The build is also fast.\n"
        "The deploy is what happens after the tests pass and the review is done and merged.\n"
        "We also use ruff for lint.\n")] == [
        ("deploy day", "friday"), ("api key", "rotat week"),
        ("we use for build", "uv")]


# -- stale ---------------------------------------------------------------------------------


def test_a_note_citing_a_path_gone_from_the_workspace_is_stale(store, cwd):
    hand_written(cwd / "memory" / "api.md", "The API starts in `src/api/server.py`.\n", NOW)
    hand_written(cwd / "memory" / "old.md",
                 "The API used to start in `src/old.py` and [docs](docs/api.md).\n", NOW)
    assert candidate_groups(store, "project") == [Group(
        "stale", ("project:old.md",),
        "cites src/old.py: not in the workspace; cites docs/api.md: not in the workspace")]


# -- the run's bounds ----------------------------------------------------------------------


def test_groups_come_duplicates_first_and_stop_at_max_groups(store, cwd):
    hand_written(cwd / "memory" / "stale.md", "See `src/gone.py`.\n", NOW)
    hand_written(cwd / "memory" / "a.md", "Deploy day is Friday.\n", NOW)
    hand_written(cwd / "memory" / "b.md", "Deploy day is Monday.\n", NOW - timedelta(days=1))
    hand_written(cwd / "memory" / "c.md", BUILD, NOW)
    hand_written(cwd / "memory" / "d.md", BUILD, NOW - timedelta(days=1))
    kinds = [g.kind for g in candidate_groups(store, "workspace:")]
    assert kinds == ["duplicate", "contradiction", "stale"]
    assert [g.kind for g in candidate_groups(store, "project", max_groups=2)] == [
        "duplicate", "contradiction"]


def test_global_notes_are_grouped_apart_and_an_unknown_scope_is_refused(store, cwd):
    hand_written(cwd / "memory" / "c.md", BUILD, NOW)
    store.write("global:c.md", BUILD)
    assert candidate_groups(store, "global") == []
    # Each scope its own root: the project's pair is the project's, the global note alone.
    hand_written(cwd / "memory" / "d.md", BUILD, NOW - timedelta(days=1))
    assert candidate_groups(store, "global") == []
    assert [g.paths for g in candidate_groups(store, "project")] == [
        ("project:c.md", "project:d.md")]
    with pytest.raises(NoteError, match="unknown scope 'both'"):
        candidate_groups(store, "both")
