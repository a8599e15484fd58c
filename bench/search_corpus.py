"""The corpus the search benchmarks share: mixed English and Russian notes with labelled facts.

Concepts come in several surface forms, and notes and queries use different forms of the same
words, so the ranking has to match stems, not strings; a tenth of the notes hold an identifier.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from random import Random

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
    # Each note's fact is a set of concepts no other note has: C(30, 4) = 27,405 Russian sets
    # suffice up to 50,000 notes; beyond, five concepts (C(30, 5) = 142,506).
    per_fact = 4 if notes <= 50_000 else 5
    queries: list[str] = []
    relevant: list[str] = []
    for i in range(notes):
        russian = i % 2 == 1
        pool = ru_ids if russian else en_ids
        while True:
            triple = tuple(sorted(rng.sample(pool, per_fact)))
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
