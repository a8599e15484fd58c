"""Tidy's candidates at scale: a root of 10,000 notes (bench/search_corpus.py's) with planted
near duplicates and contradictions, and how many of the planted pairs `candidate_groups` finds,
how fast, and how many of its groups are planted ones; then the offline model's tidy of those
groups, and how many of its proposals act on a planted pair as planted (its precision).

Run: .venv/bin/python bench/tidy.py [--notes 10000] [--duplicates 500] [--contradictions 200]
         [--tidy-groups N] [--keep DIR] [--json]
A planted duplicate is a copy of a note with a few words changed (overlap ≥ 0.8); a planted
contradiction is two notes, each given one line stating one subject, with two values ("my X is
Y", "X is Y", "we use Y for X"). Goals, printed beside the figures: ≥ 0.95 of the planted pairs
found, within 10 s; the offline tidy's precision ≥ 0.9 (see `offline_tidy_precision`).

The offline tidy is the offline model's tidy child run through `run_tidy`, its proposals held:
over the first --tidy-groups candidate groups (default all), in runs of `memory.tidy.max_groups`
groups each, as that many `notes tidy` runs would be handed them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

import anyio
from search_corpus import build_corpus

from acp_memory.config.models import OFFLINE_MODEL_ID, Config, MemoryConfig
from acp_memory.engine.prompt import Templates
from acp_memory.llm.registry import ProviderHub
from acp_memory.memory.history.journal import Journal
from acp_memory.memory.history.records import Held
from acp_memory.memory.history.states import note_hash
from acp_memory.memory.roots import Roots
from acp_memory.memory.store import MemoryStore
from acp_memory.memory.tidy import Group, candidate_groups
from acp_memory.runtime.tidy_run import TIDY_SOURCE, run_tidy
from acp_memory.sessions.store import SessionStore
from acp_memory.text.shingles import text_overlap

FOUND_GOAL = 0.95
SECONDS_GOAL = 10.0
PRECISION_GOAL = 0.9
CHANGED_WORDS = (2, 14)  # words changed in a planted copy: overlaps from 0.8 to 0.99
VALUES = ("friday", "tuesday", "uv", "poetry", "pytest", "nose", "postgres", "sqlite", "blue",
          "green", "berlin", "lisbon", "nginx", "caddy", "daily", "weekly")


@dataclass
class Planted:
    duplicates: list[tuple[str, str]] = field(default_factory=list)  # (original, copy) rels
    contradictions: list[tuple[str, str]] = field(default_factory=list)


def plant(root: Path, duplicates: int, contradictions: int, seed: int = 29) -> Planted:
    """Copies of `duplicates` notes with a few words changed, and `contradictions` pairs of
    other notes each given a line stating one subject with two values."""
    rng = Random(seed)
    rels = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md"))
    picked = rng.sample(rels, duplicates + 2 * contradictions)
    planted = Planted()
    for i, rel in enumerate(picked[:duplicates]):
        lines = (root / rel).read_text(encoding="utf-8").split("\n")
        body = lines[2].split(" ")
        for at in rng.sample(range(len(body)), rng.randint(*CHANGED_WORDS)):
            body[at] = f"changed{rng.randrange(10**6)}"
        copy = f"copies/copy-{i:04d}.md"
        (root / "copies").mkdir(exist_ok=True)
        (root / copy).write_text("\n".join([*lines[:2], " ".join(body), *lines[3:]]),
                                 encoding="utf-8")
        planted.duplicates.append((rel, copy))
    pairs = picked[duplicates:]
    for k in range(contradictions):
        a, b = pairs[2 * k], pairs[2 * k + 1]
        subject = f"zone{k} {rng.choice(['deploy day', 'build tool', 'test runner', 'colour'])}"
        first, second = rng.sample(VALUES, 2)
        if k % 3 == 2:
            said = (f"We use {first} for {subject}.", f"we use {second} for {subject}.")
        else:
            said = (f"My {subject} is {first}.", f"The {subject} is {second}.")
        for rel, line in ((a, said[0]), (b, said[1])):
            with open(root / rel, "a", encoding="utf-8") as f:
                f.write(f"\n{line}\n")
        planted.contradictions.append((a, b))
    # The second of each pair is the newer by its time, not by an order of writes that a
    # coarse file clock may tie.
    now = time.time()
    for older, newer in [*planted.duplicates, *planted.contradictions]:
        os.utime(root / older, (now - 3600, now - 3600))
        os.utime(root / newer, (now, now))
    return planted


def found_share(pairs: list[tuple[str, str]], groups: list[Group], kind: str) -> float:
    """The share of planted pairs whose two notes are in one group of that kind."""
    together: dict[str, set[int]] = {}
    for n, group in enumerate(groups):
        if group.kind == kind:
            for path in group.paths:
                together.setdefault(path.removeprefix("global:"), set()).add(n)
    hit = sum(bool(together.get(a, set()) & together.get(b, set())) for a, b in pairs)
    return hit / len(pairs) if pairs else 1.0


def candidates_precision(planted: Planted, groups: list[Group]) -> float:
    """The share of groups that are exactly a planted pair of their kind."""
    wanted = {("duplicate", frozenset(p)) for p in planted.duplicates}
    wanted |= {("contradiction", frozenset(p)) for p in planted.contradictions}
    exact = sum((g.kind, frozenset(p.removeprefix("global:") for p in g.paths)) in wanted
                for g in groups)
    return exact / len(groups) if groups else 1.0


async def offline_tidy(store: MemoryStore, groups: list[Group], sessions: Path) -> list[Held]:
    """The offline model's tidy of groups, its proposals held: one `run_tidy` per
    `memory.tidy.max_groups` groups, each in a child bundle of its own under sessions."""
    cfg = Config()
    cfg.memory = MemoryConfig(enable=True)
    size = cfg.memory.tidy.max_groups
    held: list[Held] = []
    async with ProviderHub(cfg) as hub:
        model = hub.model(OFFLINE_MODEL_ID, wait_for_limit_reset=False)
        for start in range(0, len(groups), size):
            batch = groups[start:start + size]
            child = SessionStore(sessions).create(cwd=str(sessions), model_id=OFFLINE_MODEL_ID,
                                                  durable=False)
            try:
                outcome = await run_tidy(cfg, store, "global", child=child, models=[model],
                                         templates=Templates(cfg.prompts.dir),
                                         candidates=lambda _s, _scope, _n, b=batch: b)
            finally:
                child.close()
            held += outcome.held
    return held


def right_change(held: Held, planted: Planted, root: Path, journal: Journal) -> bool:
    """Whether a proposal acts on a planted pair as planted: a copy merged into it, the newer
    note, keeping every line of both; or only the older value's line dropped from the older
    note of a contradiction."""
    def said(text: str) -> list[str]:  # blank lines aside
        return [line for line in text.splitlines() if line.strip()]

    def after(state: str | None) -> list[str]:
        h = note_hash(state)
        return said(journal.blob(h).decode("utf-8")) if h else []

    def lines(rel: str) -> list[str]:
        return said((root / rel).read_text(encoding="utf-8"))

    parts = [(p.path, p.action) for p in held.all_parts]
    for original, copy in planted.duplicates:
        if parts == [(copy, "update"), (original, "delete")]:
            kept = set(after(held.after))
            return all(line in kept for line in lines(original) + lines(copy))
    for older, _newer in planted.contradictions:
        if parts == [(older, "update")]:
            return after(held.after) == lines(older)[:-1]  # its planted line is its last
    return False


def offline_tidy_precision(held: list[Held], planted: Planted, root: Path,
                           journal: Journal) -> float | None:
    """The offline tidy's precision (goal ≥ 0.9): the share of its proposals that change a
    planted pair as planted (`right_change`); None when it proposed nothing."""
    if not held:
        return None
    return sum(right_change(h, planted, root, journal) for h in held) / len(held)


def measure(work: Path, notes: int, duplicates: int, contradictions: int,
            tidy_groups: int | None = None) -> dict[str, Any]:
    root = work / "memory"
    t0 = time.perf_counter()
    build_corpus(root, notes - duplicates)
    planted = plant(root, duplicates, contradictions)
    out: dict[str, Any] = {"notes": notes, "duplicates": duplicates,
                           "contradictions": contradictions,
                           "generate_s": time.perf_counter() - t0}
    journal = Journal(work / "journal.db")  # where the tidy's proposals are held
    with MemoryStore(Roots(root), work / "cache", journal=journal, source=TIDY_SOURCE) as store:
        start = time.perf_counter()
        groups = candidate_groups(store, "global", max_groups=10**9)
        out["candidates_s"] = time.perf_counter() - start
        out["groups"] = len(groups)
        out["duplicates_found"] = found_share(planted.duplicates, groups, "duplicate")
        out["contradictions_found"] = found_share(planted.contradictions, groups,
                                                  "contradiction")
        total = len(planted.duplicates) + len(planted.contradictions)
        out["found"] = (out["duplicates_found"] * len(planted.duplicates)
                        + out["contradictions_found"] * len(planted.contradictions)) / total
        out["candidates_precision"] = candidates_precision(planted, groups)
        out["lowest_planted_overlap"] = min(
            text_overlap(*((root / rel).read_text(encoding="utf-8") for rel in pair))
            for pair in planted.duplicates)
        tidied = groups[:tidy_groups]
        start = time.perf_counter()
        held = anyio.run(offline_tidy, store, tidied, work / "sessions")
        out["tidy_s"] = time.perf_counter() - start
        out["tidy_groups"] = len(tidied)
        out["tidy_proposals"] = len(held)
        out["offline_tidy_precision"] = offline_tidy_precision(held, planted, root, journal)
    journal.close()
    return out


def report(f: dict[str, Any]) -> None:
    print(f"root: {f['notes']} notes, {f['duplicates']} planted duplicates, "
          f"{f['contradictions']} planted contradictions (generated in {f['generate_s']:.0f} s)")
    print(f"candidate groups: {f['groups']} in {f['candidates_s']:.2f} s "
          f"(goal ≤ {SECONDS_GOAL:.0f} s)")
    print(f"planted pairs found: {f['found']:.3f} (goal ≥ {FOUND_GOAL}); duplicates "
          f"{f['duplicates_found']:.3f}, contradictions {f['contradictions_found']:.3f}")
    print(f"lowest overlap of a planted duplicate: {f['lowest_planted_overlap']:.3f}")
    print(f"groups that are a planted pair: {f['candidates_precision']:.3f}")
    offline = f["offline_tidy_precision"]
    print(f"offline tidy: {f['tidy_proposals']} proposals held over {f['tidy_groups']} of the "
          f"{f['groups']} groups in {f['tidy_s']:.1f} s; precision "
          + (f"{offline:.3f} (goal ≥ {PRECISION_GOAL})" if offline is not None
             else "not measured (nothing proposed)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--duplicates", type=int, default=500)
    parser.add_argument("--contradictions", type=int, default=200)
    parser.add_argument("--tidy-groups", type=int,
                        help="run the offline tidy over the first N candidate groups (all)")
    parser.add_argument("--keep", type=Path, help="build the root here and keep it")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args()
    if args.duplicates + 2 * args.contradictions > args.notes - args.duplicates:
        parser.error("too few notes for the planted pairs")
    work = args.keep or Path(tempfile.mkdtemp(prefix="acp-memory-bench-"))
    try:
        figures = measure(work, args.notes, args.duplicates, args.contradictions,
                          args.tidy_groups)
        report(figures)
        if args.json:
            print(json.dumps(figures))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
