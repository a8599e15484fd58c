"""Whether a long-running front end stays flat: its open descriptors and resident memory, read
from /proc (Linux), compared in the same run before and after many sessions.

"Flat" as issue 20 pins it: descriptors at most the start plus 16, RSS at most the start plus
50 MB. The start is taken once the front end holds its steady state (more sessions served than
`sessions.max_open`, which it keeps open by design); its figures when it had just started are
shown beside.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

FD_SLACK = 16
RSS_SLACK_MB = 50.0


@dataclass(frozen=True)
class Usage:
    descriptors: int
    rss_mb: float


def usage(pid: int) -> Usage:
    """The process's open descriptors and resident set size now."""
    descriptors = sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return Usage(descriptors, rss_kb / 1024)


def report(title: str, points: list[tuple[str, Usage]]) -> bool:
    """Print the points (the first as started, the second the start, the last the end) and
    whether the end is flat against the start."""
    print(f"  {title}")
    print(f"    {'':<36} {'descriptors':>11} {'RSS':>10}")
    for label, point in points:
        print(f"    {label:<36} {point.descriptors:>11} {point.rss_mb:>7.1f} MB")
    start, end = points[1][1], points[-1][1]
    more_fds, more_mb = end.descriptors - start.descriptors, end.rss_mb - start.rss_mb
    flat = more_fds <= FD_SLACK and more_mb <= RSS_SLACK_MB
    print(
        f"    {'flat' if flat else 'NOT FLAT'}: end - start = {more_fds:+d} descriptors "
        f"(at most +{FD_SLACK}), {more_mb:+.1f} MB (at most +{RSS_SLACK_MB:.0f} MB)",
        flush=True,
    )
    return flat
