"""Search at scale: index build, warm and after-edit latency against ripgrep, and ranking quality.

Run: .venv/bin/python bench/search.py [--notes 10000] [--keep DIR] [--watchers]
Prints every figure beside a baseline measured in the same run (ripgrep for speed, the seed's
plain word-overlap ranking for quality). --watchers instead compares the index's change
notification (inotify, read directly) with the watchfiles library on the same corpus: searches
with and without a hand edit just before, whether the edit was seen, descriptors and threads
per root. Run it once more beside a few busy loops (`python -c 'while True: pass' &`) to see
what a loaded machine does to a watcher that runs on a thread of its own.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from random import Random
from typing import Any

from acp_memory.memory.index import sync as index_sync
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore
from acp_memory.memory.watch import Changes, Watcher

HITS = 8

# Concepts with several surface forms; notes and queries use different forms of the same words.
EN = [
    "deploy deploys deployed deploying deployment", "rotate rotates rotated rotating rotation",
    "key keys", "server servers", "database databases", "backup backups backed backing",
    "migrate migrates migrated migrating migration", "cluster clusters clustered",
    "schedule schedules scheduled scheduling", "invoice invoices invoiced",
    "customer customers", "report reports reported reporting", "meeting meetings",
    "release releases released releasing", "test tests tested testing",
    "cache caches cached caching", "queue queues queued queuing", "token tokens",
    "budget budgets budgeted", "vendor vendors", "contract contracts contracted",
    "network networks networking", "printer printers printing", "garden gardens gardening",
    "recipe recipes", "travel travels travelled traveling", "flight flights",
    "doctor doctors", "payment payments", "license licenses licensed licensing",
    "monitor monitors monitored monitoring", "alert alerts alerted alerting",
    "upgrade upgrades upgraded upgrading", "install installs installed installing",
    "compile compiles compiled compiling", "bicycle bicycles", "library libraries",
    "holiday holidays", "password passwords", "certificate certificates",
]
RU = [
    "кошка кошки кошку кошкой кошками", "собака собаки собаку собакой собаками",
    "сервер сервера серверу сервером серверами", "отчёт отчёта отчёту отчётом отчёты",
    "встреча встречи встречу встречей встречами", "ключ ключа ключу ключом ключи",
    "база базы базу базой базами", "договор договора договору договором договоры",
    "поездка поездки поездку поездкой поездками", "книга книги книгу книгой книгами",
    "машина машины машину машиной машинами", "праздник праздника празднику праздником",
    "бюджет бюджета бюджету бюджетом", "клиент клиента клиенту клиентом клиенты",
    "релиз релиза релизу релизом релизы", "тест теста тесту тестом тесты",
    "расписание расписания расписанию расписанием", "оплата оплаты оплату оплатой",
    "сеть сети сетью сетями", "сад сада саду садом сады", "рецепт рецепта рецепту рецептом",
    "врач врача врачу врачом врачи", "лицензия лицензии лицензию лицензией",
    "обновление обновления обновлению обновлением", "установка установки установку",
    "библиотека библиотеки библиотеку библиотекой", "велосипед велосипеда велосипедом",
    "пароль пароля паролю паролем пароли", "сертификат сертификата сертификатом",
    "очередь очереди очередью очередями",
]
CONCEPTS = [c.split() for c in EN + RU]


@dataclass
class Corpus:
    root: Path
    queries: list[str]
    relevant: list[str]  # the rel path each query is labelled with


def _filler(rng: Random, cyrillic: bool) -> list[str]:
    letters = "абвгдежзиклмнопрстуфхцчшэюя" if cyrillic else "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(15000)]


def build_corpus(root: Path, notes: int, seed: int = 7) -> Corpus:
    """A deterministic corpus of mixed English and Russian notes with labelled facts."""
    rng = Random(seed)
    vocab = {False: _filler(rng, False), True: _filler(rng, True)}
    weights = [1 / (r + 1) for r in range(15000)]  # Zipf-like word frequencies
    en_ids = range(len(EN))
    ru_ids = range(len(EN), len(CONCEPTS))
    used: set[tuple[int, ...]] = set()
    queries: list[str] = []
    relevant: list[str] = []
    for i in range(notes):
        russian = i % 2 == 1
        pool = ru_ids if russian else en_ids
        while True:
            triple = tuple(sorted(rng.sample(pool, 4)))  # C(30, 4) > 5000 notes
            if triple not in used:
                used.add(triple)
                break
        forms = [rng.randrange(len(CONCEPTS[c])) for c in triple]
        fact = " ".join(CONCEPTS[c][f] for c, f in zip(triple, forms, strict=True))
        ident = ""
        kind = i % 10
        if kind == 0:
            ident = f"MEMFRUIT_{i:04X}"
        elif kind == 5:
            ident = f"{CONCEPTS[triple[0]][0]}_{vocab[False][i % 15000]}_{i}_handler"
        words = rng.choices(vocab[russian], weights, k=380 if russian else 450)
        cut = rng.randrange(len(words))
        words[cut:cut] = [fact + ".", ident]
        rel = f"topic{i % 97:02d}/note-{i:05d}.md"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {i}\n\n" + " ".join(words) + "\n", encoding="utf-8")
        if len(queries) < 200 and rng.random() < 0.05:
            if ident and kind == 0:
                q = ident if len(queries) % 2 else ident.replace("_", " ").lower()
            elif ident:
                q = " ".join(ident.split("_")[1:3])  # by its parts
            elif rng.random() < 0.3:  # the same word forms: the baseline's best case
                q = fact
            else:
                other = [(f + 1 + rng.randrange(len(CONCEPTS[c]) - 1)) % len(CONCEPTS[c])
                         for c, f in zip(triple, forms, strict=True)]
                q = " ".join(CONCEPTS[c][f] for c, f in zip(triple, other, strict=True))
            queries.append(q)
            relevant.append(rel)
    return Corpus(root, queries, relevant)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(len(values) * 0.95) - 1)]


def overlap_ranking(corpus: Corpus) -> list[list[str]]:
    """The seed's ranking: distinct query words present in the note's path plus body."""
    word = re.compile(r"\w+")
    qwords = [set(word.findall(q.lower())) for q in corpus.queries]
    wanted = set().union(*qwords)
    postings: dict[str, set[str]] = {w: set() for w in wanted}
    for path in sorted(corpus.root.rglob("*.md")):
        rel = path.relative_to(corpus.root).as_posix()
        text = rel + " " + path.read_text(encoding="utf-8")
        for w in set(word.findall(text.lower())) & wanted:
            postings[w].add(rel)
    ranked = []
    for words in qwords:
        scores: dict[str, int] = {}
        for w in words:
            for rel in postings[w]:
                scores[rel] = scores.get(rel, 0) + 1
        ranked.append(sorted(scores, key=lambda r: (-scores[r], r))[:HITS])
    return ranked


def quality(ranked: list[list[str]], relevant: list[str]) -> tuple[float, float]:
    """recall@8 and MRR for one relevant note per query."""
    recall = sum(rel in r[:HITS] for r, rel in zip(ranked, relevant, strict=True)) / len(relevant)
    mrr = sum(1 / (r.index(rel) + 1) if rel in r else 0.0
              for r, rel in zip(ranked, relevant, strict=True)) / len(relevant)
    return recall, mrr


def ripgrep(root: Path, queries: list[str]) -> list[float] | None:
    if shutil.which("rg") is None:
        print("ripgrep (rg) is not installed: skipping the rg baseline "
              "(apt-get install -y ripgrep to get it)")
        return None
    return [
        timed(partial(subprocess.run, ["rg", "-i", "-F", "-l", "--", q, str(root)],
                      capture_output=True, check=False))
        for q in queries
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, help="build the corpus here and keep it")
    parser.add_argument("--watchers", action="store_true",
                        help="compare inotify with watchfiles instead")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="acp-memory-bench-"))
    try:
        if args.watchers:
            compare_watchers(work, args.notes)
        else:
            run(work, args.notes)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def run(work: Path, notes: int) -> None:
    root = work / "memory"
    t0 = time.perf_counter()
    corpus = build_corpus(root, notes)
    size = sum(p.stat().st_size for p in root.rglob("*.md"))
    print(f"corpus: {notes} notes, {size / 1e6:.1f} MB, {len(corpus.queries)} labelled queries "
          f"(generated in {time.perf_counter() - t0:.1f}s)")
    store = MemoryStore(Roots(root), work / "cache")
    search = store.search

    first = timed(lambda: search(corpus.queries[0], "global", HITS))
    warm = [timed(partial(search, q, "global", HITS)) for q in corpus.queries]
    target = root / corpus.relevant[0]
    with open(target, "a", encoding="utf-8") as f:  # a hand edit, in place
        f.write("\nquokkaedit marker added by hand\n")
    after_edit_hits: list[str] = []
    after_edit = timed(lambda: after_edit_hits.extend(
        h.path for h in search("quokkaedit", "global", HITS)))
    seen = after_edit_hits == [f"global:{corpus.relevant[0]}"]

    rg = ripgrep(root, corpus.queries)
    med = statistics.median(warm)
    print(f"first search (index build): {first:9.1f} ms")
    print(f"warm search median:         {med:9.2f} ms   p95 {p95(warm):.2f} ms")
    print(f"first search after a hand edit: {after_edit:5.1f} ms   edit visible: {seen}")
    if rg:
        rg_med = statistics.median(rg)
        print(f"rg -i -F scan median:       {rg_med:9.2f} ms   p95 {p95(rg):.2f} ms")
        print(f"ratios vs rg median: warm median {rg_med / med:.1f}x faster, warm p95 "
              f"{p95(rg) / p95(warm):.1f}x, after-edit {rg_med / after_edit:.2f}x, "
              f"first (build) {rg_med / first:.3f}x  (target: warm >= 20x)")

    ours = [[h.path.removeprefix("global:") for h in search(q, "global", HITS)]
            for q in corpus.queries]
    base = overlap_ranking(corpus)
    r_ours, m_ours = quality(ours, corpus.relevant)
    r_base, m_base = quality(base, corpus.relevant)
    print(f"quality on {len(corpus.queries)} labelled queries:")
    print(f"  ours (BM25, stems, identifiers): recall@8 {r_ours:.3f}  MRR {m_ours:.3f}")
    print(f"  seed word overlap:               recall@8 {r_base:.3f}  MRR {m_base:.3f}")
    store.close()


class WatchfilesWatcher:
    """The index's Watcher interface over watchfiles: one recursive watch of the whole root."""

    def __init__(self) -> None:
        self._notify: Any = None
        self._root = ""

    def add(self, folder: str, rel: str) -> None:
        from watchfiles._rust_notify import RustNotify

        if rel == "":
            self._root = folder
            self._notify = RustNotify([folder], False, False, 50, True, True)

    def drain(self) -> Changes:
        changes = Changes()
        # The shortest wait watchfiles offers: 0 would mean "until something changes".
        found = self._notify.watch(0, 0, 1, None)
        for _, path in found if isinstance(found, set) else ():
            rel = os.path.relpath(path, self._root)
            if rel.lower().endswith((".md", ".txt")):
                changes.files.add(rel)
            else:
                changes.rescan = True
        return changes

    def close(self) -> None:
        if self._notify is not None:
            self._notify.close()
            self._notify = None


def _count(folder: str) -> int:
    return len(os.listdir(folder))


def compare_watchers(work: Path, notes: int, edits: int = 50) -> None:
    corpus = build_corpus(work / "memory", notes)
    print(f"corpus: {notes} notes; {edits} hand edits, each followed at once by a search")
    for name, watcher in (("inotify", Watcher), ("watchfiles", WatchfilesWatcher)):
        index_sync.Watcher = watcher  # type: ignore[misc, assignment]
        fds, threads = _count("/proc/self/fd"), _count("/proc/self/task")
        with MemoryStore(Roots(work / "memory"), work / f"cache-{name}") as store:
            first = timed(lambda: store.search(corpus.queries[0], "global", HITS))
            extra_fds = _count("/proc/self/fd") - fds
            extra_threads = _count("/proc/self/task") - threads
            warm = [timed(partial(store.search, q, "global", HITS)) for q in corpus.queries[:100]]
            after, seen = [], 0
            target = work / "memory" / corpus.relevant[0]
            for i in range(edits):
                with open(target, "a", encoding="utf-8") as f:
                    f.write(f"\nzqmarker{i}\n")
                start = time.perf_counter()
                hits = store.search(f"zqmarker{i}", "global", HITS)
                after.append((time.perf_counter() - start) * 1000)
                seen += bool(hits)
        index_sync.Watcher = Watcher  # type: ignore[misc]
        print(f"{name:10}  first search {first:7.1f} ms, +{extra_fds} descriptors "
              f"+{extra_threads} threads for the root; warm median "
              f"{statistics.median(warm):.2f} ms; right after an edit median "
              f"{statistics.median(after):.2f} ms, edit seen {seen}/{edits}")


if __name__ == "__main__":
    main()
