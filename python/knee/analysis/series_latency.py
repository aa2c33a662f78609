"""The latency of series intervals: the engine counts each interval's successes in buckets of a sixteenth of an
octave (crates/engine/src/buckets.rs: a bucket each below 16 µs; above, (16 + s)·2^k … (17 + s)·2^k − 1 µs), and
a run of intervals adds their buckets. A percentile is read as HdrHistogram reads one: the highest value of the
bucket in which the rank ⌈q · count⌉ falls, within 6.25 % of the exact one. Each point's own p50_ms and p99_ms are
the engine's reading of its buckets; `percentile_ms` reads any run of them."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from knee.model import SeriesPoint

SUB = 16  # buckets per octave, and values below it have one each


def bucket_of(us: int) -> int:
    """The bucket that holds `us` microseconds."""
    if us < SUB:
        return max(us, 0)
    shift = us.bit_length() - 1 - 4  # the octave's, less the 4 bits of its sixteen buckets
    return SUB + shift * SUB + ((us >> shift) & (SUB - 1))


def highest_us(bucket: int) -> int:
    """The highest value, in µs, that `bucket` holds."""
    if bucket < SUB:
        return bucket
    shift, sub = divmod(bucket - SUB, SUB)
    return ((SUB + sub + 1) << shift) - 1


def percentile_ms(points: Iterable[SeriesPoint], percent: float) -> float | None:
    """The successes' latency at `percent` (99.0: the p99) over `points` together; None when none succeeded in
    them (or the run was recorded before the series kept latency)."""
    counts: Counter[int] = Counter()
    for p in points:
        for bucket, n in p.latency:
            counts[bucket] += n
    total = sum(counts.values())
    if not total:
        return None
    rank = min(max(math.ceil(percent / 100.0 * total), 1), total)
    seen = 0
    for bucket in sorted(counts):
        seen += counts[bucket]
        if seen >= rank:
            return highest_us(bucket) / 1000.0
    raise AssertionError("the ranks end at the total")
