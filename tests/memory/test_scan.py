"""The direct scan's look at a file's bytes before its text: it skips only files that cannot
hold a query word, so the scan finds what the text alone finds, in the same order; and the
bound on a build's wait for the scans running."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from random import Random

import pytest

from acp_memory.memory import scan as scan_module
from acp_memory.memory.scan import Scans, fold, scan_notes
from acp_memory.text.analyze import parse_query

NOTES: dict[str, bytes] = {
    "en/deploy.md": b"We Deployed the cluster on Friday; the rotation of keys follows.",
    "en/backup-plan.md": b"Nothing else in here.",
    "en/kelvin.md": "The \u212aEY is under the mat.".encode(),
    "en/xray.md": "Bring the \u0130S results, and an XİS report.".encode(),
    "en/ids.md": b"Flag MEMFRUIT-1A2B is set; memfruit_1a2bc is another one.",
    "en/longer.md": b"MEMFRUIT_1A2BC only, a longer identifier.",
    "en/broken.md": b"\xff\xfe a garden \xd0 with a KEY \xe2\x84",
    "ru/cats.md": "КОШКАМИ занимается Соседка, а ключи у неё.".encode(),
    "ru/tree.md": "Ёлка стоит в углу, рядом СЕРВЕРЫ.".encode(),
    "ru/inside.md": "Подкошками не слово, а ключница есть.".encode(),
    "ru/ёж.md": "Про ежа.".encode(),
    "garden/plan.md": b"Nothing about it but the path.",
}
QUERIES = [
    "deploying", "rotated keys", "key", "xi", "MEMFRUIT_1A2B", "memfruit 1a2b", "garden",
    "кошка", "елка серверам", "ключ", "ёж", "backup plans", "кошками ключи garden",
    "деплой key сервер", "日本語 key",
]


def write(root: Path, notes: dict[str, bytes]) -> None:
    for rel, data in notes.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def generated(count: int) -> dict[str, bytes]:
    """Notes of English and Russian words in every case and form, some joined by hyphens."""
    rng = Random(7)
    words = ("deploy deployed deploying Keys KEY rotation Rotated server-side garden "
             "кошка КОШКИ кошкой Ёлки елка ключом Ключ серверы Сервер ёж ЕЖА").split()
    return {
        f"t{i % 7}/n{i:03}.md": " ".join(rng.choices(words, k=rng.randint(0, 6))).encode()
        for i in range(count)
    }


def scanned(root: Path, query: str) -> list[tuple[str, int]]:
    found = scan_notes([("global", root)], parse_query(query), 10_000, bool)
    assert found is not None
    return [(rel, score) for _, _, rel, score in found[0]]


def test_a_scan_finds_the_same_notes_in_the_same_order_as_by_their_text_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, {**NOTES, **generated(300)})
    queries = [*QUERIES, "deployment gardens", "ключи кошками ежи", "server_side", "SERVER"]
    with_bytes = {q: scanned(tmp_path, q) for q in queries}
    monkeypatch.setattr(scan_module, "_BYTE_FOLDED", frozenset())  # every file read as text
    assert with_bytes == {q: scanned(tmp_path, q) for q in queries}
    assert all(with_bytes.values())


def test_the_notes_only_their_folded_text_matches_are_found(tmp_path: Path) -> None:
    write(tmp_path, NOTES)
    rels = {q: [rel for rel, _ in scanned(tmp_path, q)] for q in QUERIES}
    assert rels["deploying"] == ["en/deploy.md"]  # the stem begins a longer word
    assert rels["key"] == ["en/broken.md", "en/deploy.md", "en/kelvin.md"]  # KELVIN SIGN
    assert rels["xi"] == ["en/xray.md"]  # İ lowers to i and a dot
    assert rels["MEMFRUIT_1A2B"][0] == "en/ids.md"  # the identifier whole, hyphenated
    assert rels["кошка"] == ["ru/cats.md"]  # capitals; not inside a longer word
    assert rels["елка серверам"] == ["ru/tree.md"]  # ё as е
    assert rels["ёж"] == ["ru/ёж.md"]  # by its path
    assert rels["backup plans"] == ["en/backup-plan.md", "garden/plan.md"]  # by the paths
    assert rels["ключ"] == ["ru/cats.md", "ru/inside.md"]
    assert "en/broken.md" in rels["garden"] and "garden/plan.md" in rels["garden"]


def test_the_byte_fold_reads_each_character_as_its_folded_text_reads(  # every code point
) -> None:
    table, folded_chars = scan_module._FOLD_BYTES, scan_module._BYTE_FOLDED
    unlike = set(scan_module._UNLIKE.values())
    for point in range(sys.maxunicode + 1):
        if 0xD800 <= point < 0xE000:
            continue  # surrogates: never in decoded text
        char = chr(point)
        folded = fold(char)
        if not folded_chars.intersection(folded) or char.encode() in unlike:
            continue
        assert len(folded) == 1, char
        assert char.encode().translate(table) == folded.encode().translate(table), char


def test_a_scan_that_outlasts_the_builds_wait_is_not_waited_for_again() -> None:
    scans = Scans()
    outlasted: set[int] = set()
    scans.give_way(0, outlasted)
    assert outlasted == set()  # no scan running: nothing to wait for
    with scans.running():
        scans.give_way(0, outlasted)  # the bound passes with the scan still running
        assert len(outlasted) == 1
    with scans.running():  # a later scan is waited for again
        scans.give_way(0, outlasted)
        assert len(outlasted) == 2


def test_a_word_character_is_what_a_regular_expression_matches_as_one() -> None:
    word = re.compile(r"\w")
    assert [
        point for point in range(sys.maxunicode + 1)
        if not 0xD800 <= point < 0xE000
        and bool(word.match(chr(point))) != scan_module._word_char(chr(point))
    ] == []
