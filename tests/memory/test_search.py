"""Ranking, languages, identifiers, snippets, and an index that always matches the files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_memory.memory.index import sync as index_sync
from acp_memory.memory.index.root import Lists
from acp_memory.memory.index.schema import db_path_for
from acp_memory.memory.search import SNIPPET_CHARS
from acp_memory.memory.store import MemoryStore
from acp_memory.text.analyze import Query


def paths(store: MemoryStore, query: str, scope: str = "both", limit: int = 8) -> list[str]:
    return [h.path for h in store.search(query, scope, limit)]


def test_inflected_english_forms_match(store: MemoryStore) -> None:
    store.save("Deploys", "We rotated the deployment keys yesterday.", "global")
    store.save("Other", "Nothing about it here.", "global")
    assert paths(store, "rotating deploy key") == ["global:deploys.md"]


def test_inflected_russian_forms_match(store: MemoryStore) -> None:
    store.save("Питомцы", "Маша ухаживает за кошками и собаками.", "project")
    store.save("Работа", "Совещание перенесли на пятницу.", "project")
    assert paths(store, "кошка") == ["project:питомцы.md"]
    assert paths(store, "совещания") == ["project:работа.md"]


def test_other_scripts_match_by_word_and_cjk_by_character_pairs(store: MemoryStore) -> None:
    store.save("greek", "Το γραφείο είναι στην Αθήνα.", "global")
    store.save("japanese", "会議は金曜日に東京で行います。", "global")
    assert paths(store, "Αθήνα") == ["global:greek.md"]
    assert paths(store, "東京") == ["global:japanese.md"]


def test_identifiers_match_by_parts_and_whole(store: MemoryStore) -> None:
    store.save("verifier", "Set VERIFIER_TOKEN before running the checks.", "global")
    store.save("fruit", "The code word is MEMFRUIT_1A2B.", "global")
    store.save("snake", "Call load_user_profile() at start-up.", "global")
    assert paths(store, "VERIFIER_TOKEN") == ["global:verifier.md"]
    assert paths(store, "verifier") == ["global:verifier.md"]
    assert paths(store, "memfruit") == ["global:fruit.md"]
    assert paths(store, "MEMFRUIT_1A2B") == ["global:fruit.md"]
    assert paths(store, "MEMFRUIT-1A2B") == ["global:fruit.md"]
    assert paths(store, "user profile") == ["global:snake.md"]
    assert paths(store, "load_user_profile") == ["global:snake.md"]


def test_exact_identifier_match_ranks_first(store: MemoryStore) -> None:
    store.save("words", "verifier token " * 40 + "the verifier checks a token", "global")
    store.save("noise", "token token token verifier verifier", "project")
    store.save("exact", "Long text. " * 50 + "Remember VERIFIER_TOKEN.", "global", "deep/x.md")
    hits = store.search("VERIFIER_TOKEN")
    assert hits[0].path == "global:deep/x.md"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_path_words_count_toward_relevance(store: MemoryStore) -> None:
    store.save("kubernetes cluster", "notes on nodes", "global")
    store.save("misc", "we might use kubernetes someday, or not", "global")
    assert paths(store, "kubernetes")[0] == "global:kubernetes-cluster.md"


def test_hits_are_bounded_and_carry_path_score_and_short_snippet(store: MemoryStore) -> None:
    for i in range(12):
        store.save(f"apple {i}", "apple pie. " * 400 + f"number {i}", "global")
    hits = store.search("apple", limit=8)
    assert len(hits) == 8
    for hit in hits:
        assert hit.path.startswith("global:apple-") and hit.score > 0
        assert 0 < len(hit.snippet) <= SNIPPET_CHARS


def test_snippet_centres_on_the_matches_of_a_long_note(store: MemoryStore) -> None:
    body = "filler words here\n" * 300 + "The zanzibar ferry leaves at noon.\n" + "more\n" * 300
    store.write("global:trip.md", body)
    (hit,) = store.search("zanzibar")
    assert "zanzibar ferry" in hit.snippet and len(hit.snippet) <= SNIPPET_CHARS


def test_no_match_is_an_empty_result(store: MemoryStore) -> None:
    store.save("a", "alpha", "global")
    assert store.search("zzzqqq") == []


def test_scope_limits_the_search(store: MemoryStore) -> None:
    store.save("g", "shared word", "global")
    store.save("p", "shared word", "project")
    assert paths(store, "shared", "global") == ["global:g.md"]
    assert paths(store, "shared", "project") == ["project:p.md"]
    assert sorted(paths(store, "shared")) == ["global:g.md", "project:p.md"]


def test_a_search_cut_by_the_limit_counts_every_match_of_the_answering_tier(
    store: MemoryStore,
) -> None:
    for i in range(3):
        store.save(f"pear {i}", "ripe pear", "global")
    store.save("pear tree", "a pear", "project")
    store.save("orchard", "ripe apples", "global")  # matches one word only: a lower tier
    hits = store.search("ripe pear", "both", 2)
    assert (len(hits), hits.total) == (2, 4)
    assert store.search("ripe pear", "global", 8).total == 3
    assert store.search("ripe pear", "global", 1).total == 3
    assert store.search("walnut", "both", 1).total == 0


def test_a_note_deleted_after_the_index_answered_is_neither_shown_nor_counted(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("pear", "pear tree"):
        store.save(name, "ripe pear", "global")
    lists = store.indexes.lists

    def then_one_is_deleted(root: Path, query: Query, depth: int) -> Lists | None:
        found = lists(root, query, depth)
        (root / "pear.md").unlink()  # between the index's answer and the read of the note
        return found

    monkeypatch.setattr(store.indexes, "lists", then_one_is_deleted)
    hits = store.search("ripe pear", "global", 8)
    assert ([h.path for h in hits], hits.total) == (["global:pear-tree.md"], 1)


@pytest.mark.parametrize("notify", [True, False], ids=["inotify", "walk-only"])
def test_hand_edits_new_files_and_deletions_are_seen_by_the_next_search(
    store: MemoryStore, notify: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not notify:
        def no_inotify() -> None:
            raise OSError("inotify disabled for this test")

        monkeypatch.setattr(index_sync, "Watcher", no_inotify)
    root = store.roots.global_root
    store.save("note", "the original walrus", "global")
    assert paths(store, "walrus") == ["global:note.md"]
    with open(root / "note.md", "a", encoding="utf-8") as f:  # in place, as many editors do
        f.write(" and a narwhal")
    assert paths(store, "narwhal") == ["global:note.md"]
    (root / "sub").mkdir()
    (root / "sub" / "new.md").write_text("a fresh platypus")
    assert paths(store, "platypus") == ["global:sub/new.md"]
    (root / "sub" / "new.md").rename(root / "sub" / "moved.md")
    assert paths(store, "platypus") == ["global:sub/moved.md"]
    os.unlink(root / "note.md")
    assert paths(store, "walrus") == []
    (root / "sub").rename(root / "renamed")
    assert paths(store, "platypus") == ["global:renamed/moved.md"]


def test_an_edit_by_another_process_is_seen_by_the_very_next_search(store: MemoryStore) -> None:
    # The kernel queues the change notification as part of the other process's write, so the
    # search that follows it finds it without waiting for anything.
    store.save("note", "the original walrus", "global")
    assert paths(store, "walrus") == ["global:note.md"]
    note = store.roots.global_root / "note.md"
    for word in ("narwhal", "dugong", "manatee"):
        subprocess.run([sys.executable, "-c", f"open({str(note)!r}, 'w').write('a {word}')"],
                       check=True, timeout=60)
        assert paths(store, word) == ["global:note.md"]
        assert paths(store, "walrus") == []


def test_index_lives_in_the_cache_folder_not_in_the_roots(store: MemoryStore) -> None:
    store.save("x", "indexed", "global")
    store.search("indexed")
    db = db_path_for(store.roots.global_root, store.cache_dir)
    assert db.exists() and store.cache_dir in db.parents
    for root in (store.roots.global_root, store.roots.project_root):
        assert root is not None
        assert not any(p.suffix.startswith(".sqlite") for p in root.rglob("*"))


def test_a_corrupt_index_is_rebuilt_from_the_files(tmp_path: Path, store: MemoryStore) -> None:
    store.save("x", "resilient heron", "global")
    cache = tmp_path / "fresh-cache"
    db = db_path_for(store.roots.global_root, cache)
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not a database" * 100)
    fresh = MemoryStore(store.roots, cache)
    assert paths(fresh, "heron") == ["global:x.md"]


def test_notes_holding_every_query_word_beat_notes_repeating_one(store: MemoryStore) -> None:
    store.save("one word", "backup " * 50, "global")
    store.save("both words", "the nightly backup of the ledger", "global")
    assert paths(store, "ledger backups") == ["global:both-words.md"]
    assert paths(store, "ledger backups zebra")[0] == "global:both-words.md"
