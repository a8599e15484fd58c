"""Search at scale: the index build, the direct scan, warm and after-edit searches against
ripgrep, the agent's memory, and ranking quality; with --embeddings, the fused search too.

Run: .venv/bin/python bench/search.py [--notes 10000] [--keep DIR] [--json]
         [--embeddings URL MODEL | --embeddings hash] [--dimensions N]
URL is an OpenAI-compatible base (http://localhost:11434/v1 for Ollama, say) and MODEL its
embedding model; `hash` starts bench/hash_embeddings.py, a loopback server of meaningless
hashed vectors, to time the fused path with no model at hand. With --notes above 10,000 a
10,000-note corpus is indexed in the same run too, for the ratio of the two builds. Every index
is measured in a child process of its own, so its RSS is what an agent holding it would use.
Figures stand beside baselines of the same run: `rg -i -F` over the same files for speed, the
seed's plain word overlap for quality.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from search_corpus import (
    HITS,
    Corpus,
    build_corpus,
    overlap_ranking,
    p95,
    quality,
    timed,
)

BUILD_VS_RG = 40  # the bounds, printed beside the figures
BIG_BUILD_VS_SMALL = 11
INDEX_VS_NOTES = 1.3


def ripgrep(root: Path, queries: list[str]) -> list[float] | None:
    if shutil.which("rg") is None:
        print("ripgrep (rg) is not installed: no rg baseline (apt-get install -y ripgrep)")
        return None
    return [
        timed(partial(subprocess.run, ["rg", "-i", "-F", "-l", "--", q, str(root)],
                      capture_output=True, check=False))
        for q in queries
    ]


def measure(corpus: Corpus, cache: Path, embeddings: list[str] | None, dims: int | None,
            build_only: bool = False) -> dict[str, Any]:
    """The child's figures for one corpus (see `child`)."""
    spec = cache.with_suffix(".queries.json")
    spec.write_text(json.dumps({"queries": corpus.queries, "relevant": corpus.relevant}))
    argv = [sys.executable, __file__, "--child", str(corpus.root), str(cache), str(spec)]
    if embeddings:
        argv += ["--embeddings", *embeddings]
    if dims:
        argv += ["--dimensions", str(dims)]
    if build_only:
        argv.append("--build-only")
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"the measuring child failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return figures


def rss_mb() -> tuple[float, float]:
    """VmRSS and VmHWM (the peak) of this process, in MB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


async def scans_during_a_build(root: Path, cache: Path, scans: list[Any]) -> list[float]:
    """The times of the scans that ran while an `IndexKeeper` built root's index in cache
    (those after it finished are left out); the build is stopped after them."""
    import anyio.to_thread

    from acp_memory.memory.index.indexes import SearchIndexes
    from acp_memory.memory.index.keeper import IndexKeeper

    times: list[float] = []
    with SearchIndexes(cache) as indexes:
        async with anyio.create_task_group() as owner:
            IndexKeeper(indexes, lambda: owner).keep([root])
            for scan in scans:
                took = await anyio.to_thread.run_sync(timed, scan)
                if indexes.ready(root):
                    break
                times.append(took)
            owner.cancel_scope.cancel()
    return times


def child(root: Path, cache: Path, spec: Path, embeddings: list[str] | None,
          dims: int | None, build_only: bool) -> None:
    """Index root in cache and print the figures as one JSON line."""
    import anyio

    from acp_memory.config import Config
    from acp_memory.config.models import (
        EmbeddingsConfig,
        MemoryConfig,
        ProviderConfig,
    )
    from acp_memory.llm.embeddings import embeddings_for
    from acp_memory.memory.index.indexes import SearchIndexes
    from acp_memory.memory.index.keeper import embed_pending
    from acp_memory.memory.roots import Roots
    from acp_memory.memory.scan import scan_notes
    from acp_memory.memory.store import MemoryStore
    from acp_memory.text.analyze import parse_query

    labelled = json.loads(spec.read_text())
    queries, relevant = labelled["queries"], labelled["relevant"]
    out: dict[str, Any] = {}
    indexes = SearchIndexes(cache)
    start = time.perf_counter()
    indexes.build(root)
    out["build_ms"] = (time.perf_counter() - start) * 1000
    out["rss_after_build_mb"], out["peak_rss_mb"] = rss_mb()
    if build_only:
        print(json.dumps(out))
        return
    out["index_mb"] = sum(p.stat().st_size for p in cache.rglob("*")) / 1e6
    store = MemoryStore(Roots(root), cache, indexes=indexes)

    def ranked() -> list[list[str]]:
        return [[h.path.removeprefix("global:") for h in store.search(q, "global", HITS)]
                for q in queries]

    # What a search costs while the index is still being built: the direct scan of the files,
    # timed while a keeper builds another index of the same notes, as in an agent.
    scans = anyio.run(scans_during_a_build, root, cache.with_name(cache.name + "-during"),
                      [partial(scan_notes, [("global", root)], parse_query(q), HITS, bool)
                       for q in queries[:10]])
    out["scan_ms"] = statistics.median(scans) if scans else float("nan")
    out["scans_during_build"] = len(scans)
    warm = [timed(partial(store.search, q, "global", HITS)) for q in queries]
    out["warm_ms"], out["warm_p95_ms"] = statistics.median(warm), p95(warm)
    out["words_quality"] = quality(ranked(), relevant)
    target = root / relevant[0]
    with open(target, "a", encoding="utf-8") as f:  # a hand edit, in place
        f.write("\nquokkaedit marker added by hand\n")
    found: list[str] = []
    out["after_edit_ms"] = timed(lambda: found.extend(
        h.path for h in store.search("quokkaedit", "global", HITS)))
    out["edit_seen"] = found == [f"global:{relevant[0]}"]
    out["rss_mb"], out["peak_rss_mb"] = rss_mb()  # embeddings off: the words alone
    if embeddings:
        url, model = embeddings
        cfg = Config(providers=[ProviderConfig(name="bench", type="openai", api_base=url)],
                     memory=MemoryConfig(embeddings=EmbeddingsConfig(
                         model=f"bench/{model}", dimensions=dims)))
        indexes.embeddings = embeddings_for(cfg)
        start = time.perf_counter()
        out["embedded"] = anyio.run(embed_pending, indexes, root)
        out["embed_s"] = time.perf_counter() - start
        out["index_with_vectors_mb"] = sum(p.stat().st_size for p in cache.rglob("*")) / 1e6
        store.search(queries[0], "global", HITS)  # loads the vectors into memory
        fused = [timed(partial(store.search, q, "global", HITS)) for q in queries]
        out["fused_ms"], out["fused_p95_ms"] = statistics.median(fused), p95(fused)
        out["fused_quality"] = quality(ranked(), relevant)
        with open(target, "a", encoding="utf-8") as f:
            f.write("\nquokkaedit again\n")
        out["fused_after_edit_ms"] = timed(lambda: store.search("quokkaedit", "global", HITS))
        out["rss_with_vectors_mb"], out["peak_with_vectors_mb"] = rss_mb()
    store.close()
    indexes.close()
    print(json.dumps(out))


def report(notes: int, size_mb: float, rg: list[float] | None, f: dict[str, Any],
           small: dict[str, Any] | None, base: tuple[float, float] | None) -> None:
    rg_med = statistics.median(rg) if rg else None
    print(f"corpus: {notes} notes, {size_mb:.1f} MB")
    if rg_med is not None:
        print(f"rg -i -F scan median:            {rg_med:9.1f} ms   p95 {p95(rg or [0]):.1f} ms")
    line = f"index build:                     {f['build_ms']:9.0f} ms"
    if rg_med is not None:
        line += f"   {f['build_ms'] / rg_med:.0f}x rg (bound {BUILD_VS_RG}x)"
    print(line)
    if small is not None:
        print(f"  10,000-note build, same run:   {small['build_ms']:9.0f} ms   this build is "
              f"{f['build_ms'] / small['build_ms']:.1f}x it (bound {BIG_BUILD_VS_SMALL}x)")
    print(f"direct scan (during a build):    {f['scan_ms']:9.1f} ms median"
          + (f"   {f['scan_ms'] / rg_med:.1f}x rg" if rg_med else "")
          + f"   ({f['scans_during_build']} scans)")
    print(f"warm search, words:              {f['warm_ms']:9.2f} ms median   "
          f"p95 {f['warm_p95_ms']:.2f} ms" + (f"   {rg_med / f['warm_ms']:.0f}x faster than rg"
                                              if rg_med else ""))
    print(f"first search after a hand edit:  {f['after_edit_ms']:9.2f} ms   "
          f"edit seen: {f['edit_seen']}")
    print(f"index file: {f['index_mb']:.0f} MB; RSS {f['rss_mb']:.0f} MB, "
          f"peak {f['peak_rss_mb']:.0f} MB (build included)")
    print(f"index size vs the notes' bytes:  {f['index_mb'] / size_mb:9.2f}x "
          f"(bound {INDEX_VS_NOTES}x)")
    r, m = f["words_quality"]
    print(f"quality on {HITS} hits: words recall@8 {r:.3f} MRR {m:.3f}", end="")
    if base is not None:
        print(f"; seed word overlap recall@8 {base[0]:.3f} MRR {base[1]:.3f}")
    else:
        print()
    if "fused_ms" in f:
        print(f"embedding {f['embedded']} notes: {f['embed_s']:.1f} s; index file with vectors "
              f"{f['index_with_vectors_mb']:.0f} MB")
        print(f"warm search, fused:              {f['fused_ms']:9.2f} ms median   "
              f"p95 {f['fused_p95_ms']:.2f} ms   {f['fused_ms'] / f['warm_ms']:.1f}x words alone")
        print(f"fused, first search after an edit: {f['fused_after_edit_ms']:7.1f} ms "
              "(the edited note's vector dropped)")
        rf, mf = f["fused_quality"]
        print(f"quality fused: recall@8 {rf:.3f} MRR {mf:.3f}  (words alone {r:.3f} / {m:.3f})")
        print(f"RSS with vectors in memory: {f['rss_with_vectors_mb']:.0f} MB, "
              f"peak {f['peak_with_vectors_mb']:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, help="build the corpus here and keep it")
    parser.add_argument("--embeddings", nargs="+", metavar="URL MODEL",
                        help="an OpenAI-compatible base URL and model, or `hash`")
    parser.add_argument("--dimensions", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--child", nargs=3, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.embeddings, args.dimensions, args.build_only)
        return
    if args.embeddings and args.embeddings != ["hash"] and len(args.embeddings) != 2:
        parser.error("--embeddings takes URL MODEL, or hash")
    work = args.keep or Path(tempfile.mkdtemp(prefix="acp-memory-bench-"))
    server = None
    try:
        embeddings = args.embeddings
        if embeddings == ["hash"]:
            server = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("hash_embeddings.py")),
                 "--dimensions", str(args.dimensions or 384)],
                stdout=subprocess.PIPE, text=True)
            assert server.stdout is not None
            embeddings = [server.stdout.readline().strip(), "hash"]
        t0 = time.perf_counter()
        corpus = build_corpus(work / "memory", args.notes)
        size = sum(p.stat().st_size for p in corpus.root.rglob("*.md")) / 1e6
        print(f"generated {args.notes} notes in {time.perf_counter() - t0:.0f} s; "
              f"{len(corpus.queries)} labelled queries")
        rg = ripgrep(corpus.root, corpus.queries)
        small = None
        if args.notes > 10_000:
            small_corpus = build_corpus(work / "small", 10_000)
            small = measure(small_corpus, work / "cache-small", None, None, build_only=True)
        figures = measure(corpus, work / "cache", embeddings, args.dimensions)
        base = quality(overlap_ranking(corpus), corpus.relevant) if args.notes <= 20_000 else None
        report(args.notes, size, rg, figures, small, base)
        if args.json:
            print(json.dumps({
                **figures, "notes": args.notes, "notes_mb": size,
                "rg_ms": statistics.median(rg) if rg else None,
                "small_build_ms": small["build_ms"] if small else None,
            }))  # fmt: skip
    finally:
        if server is not None:
            server.terminate()
            server.wait()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
