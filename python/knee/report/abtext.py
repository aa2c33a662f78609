"""The report of one level (`knee run`): ab's layout, plus what ab cannot tell.

`render` returns plain text (what the terminal shows); `to_json` the `--json`
document described by schemas/knee-run.schema.json.
"""

from __future__ import annotations

import statistics
from typing import Any

from knee import __version__
from knee.api import RunResult
from knee.model import GroupStats, LatencyStats

JSON_SCHEMA_VERSION = 1


def _stop_rule(spec: dict[str, Any]) -> str:
    stop = spec["groups"][0]["stop"]
    if "total" in stop:
        return f"{stop['total']} operations in all"
    if "per_client" in stop:
        return f"{stop['per_client']} operations per client"
    return f"{stop['duration_ms'] / 1000:g} s"


def _target(spec: dict[str, Any]) -> str:
    c = spec["groups"][0]["client"]
    if c["kind"] == "http":
        return f"{c['method']} {c['url']}"
    if c["kind"] == "tcp":
        return f"tcp://{c['addr']}"
    return " ".join(c["argv"])


def interval_counts(stats: GroupStats) -> list[int]:
    """Succeeded per interval, over whole intervals only (a final partial interval is left out)."""
    counts = [p.succeeded for p in stats.series]
    whole = int(stats.elapsed_s / stats.interval_s + 1e-9) if stats.interval_s > 0 else len(counts)
    return counts[:whole] if 0 < whole < len(counts) else counts


def _times_row(name: str, s: LatencyStats) -> str:
    if s.count == 0:
        return f"{name:<12}{'-':>8}{'-':>8}{'-':>8}{'-':>8}{'-':>8}"
    return f"{name:<12}{s.min:8.1f}{s.mean:8.1f}{s.stdev:8.1f}{s.p50:8.1f}{s.max:8.1f}"


def _pacer(r: RunResult) -> dict[str, Any] | None:
    """The open-loop pacer of the run's group, or None for a closed loop."""
    pacer = r.spec["groups"][0].get("pacer")
    return pacer if pacer and pacer.get("kind") == "rate" else None


def open_loop(r: RunResult) -> dict[str, Any] | None:
    """The open-loop figures of a run (None for a closed loop): rates, late, dropped, both latencies."""
    pacer = _pacer(r)
    if pacer is None:
        return None
    g = r.summary["groups"][0]
    return {
        "target_rate_hz": float(pacer["rate_hz"]),
        "poisson": bool(pacer.get("poisson", False)),
        "max_in_flight": pacer.get("max_in_flight"),
        "offered": int(g.get("offered", 0)),
        "offered_rate_hz": float(g.get("offered_rate_hz") or 0.0),
        "achieved_rate_hz": float(g.get("achieved_rate_hz", 0.0)),
        "late": int(g.get("late", 0)),
        "dropped": int(g.get("dropped", 0)),
        "latency_uncorrected_ms": LatencyStats.from_engine_us(g.get("latency_uncorrected_us")).model_dump(),
    }


def _open_loop_lines(r: RunResult, add: Any) -> None:
    o = open_loop(r)
    if o is None:
        return
    shape = "Poisson" if o["poisson"] else "constant"
    cap = f", at most {o['max_in_flight']} in flight" if o["max_in_flight"] else ""
    add(f"{'Offered rate:':<28}{o['offered_rate_hz']:.2f} [#/sec] ({o['offered']} arrivals; target "
        f"{o['target_rate_hz']:g}/s, {shape}{cap})")  # fmt: skip
    add(f"{'Achieved rate:':<28}{o['achieved_rate_hz']:.2f} [#/sec] (completed operations)")
    add(f"{'Late (> 10 ms after due):':<28}{o['late']}")
    add(f"{'Dropped (never started):':<28}{o['dropped']}")


def _latency_pair_lines(r: RunResult, add: Any) -> None:
    o = open_loop(r)
    if o is None or not r.stats.latency_ms.count:
        return
    c, u = r.stats.latency_ms, LatencyStats(**o["latency_uncorrected_ms"])
    add("")
    add("Latency (ms)                  p50       p99       max")
    add(f"  {'corrected':<24}{c.p50:10.3f}{c.p99:10.3f}{c.max:10.3f}  (from the intended start)")
    add(f"  {'uncorrected':<24}{u.p50:10.3f}{u.p99:10.3f}{u.max:10.3f}  (from the actual start)")


def render(r: RunResult) -> str:
    s = r.stats
    group = r.summary["groups"][0]
    spec_group = r.spec["groups"][0]
    kind = spec_group["client"]["kind"]
    lines: list[str] = []
    add = lines.append
    if r.interrupted:
        add("Interrupted: the figures below cover the part of the run that completed.")
        add("")
    mode = ""
    if kind == "http":
        mode = " (new connection per request)" if spec_group["client"].get("new_connection") else " (keep-alive)"
    add(f"{'Target:':<28}{_target(r.spec)}")
    add(f"{'Clients:':<28}{s.clients}{mode}")
    add(f"{'Stop rule:':<28}{_stop_rule(r.spec)}")
    add(f"{'Time taken:':<28}{s.elapsed_s:.3f} s")
    add(f"{'Complete operations:':<28}{s.total}")
    add(f"{'Succeeded:':<28}{s.succeeded}")
    failed = f"{s.failed}"
    if s.failures:
        failed += "  (" + ", ".join(f"{k}: {v}" for k, v in sorted(s.failures.items(), key=lambda kv: -kv[1])) + ")"
    add(f"{'Failed:':<28}{failed}")
    add(f"{'Hung (timed out, killed):':<28}{s.hung}")
    _open_loop_lines(r, add)
    add(f"{'Operations per second:':<28}{s.rate_hz:.2f} [#/sec] (succeeded, mean)")
    if s.latency_ms.count:
        add(f"{'Time per operation:':<28}{s.latency_ms.mean:.3f} [ms] (mean)")
        if s.rate_hz > 0:
            add(f"{'Time per operation:':<28}{1000.0 / s.rate_hz:.3f} [ms] (mean, across all concurrent clients)")
    add("")
    add("Connection Times (ms)")
    add(f"{'':<12}{'min':>8}{'mean':>8}{'[+/-sd]':>8}{'median':>8}{'max':>8}")
    if kind in ("http", "tcp"):
        add(_times_row("Connect:", s.connect_ms))
    if "processing_us" in group:
        add(_times_row("Processing:", LatencyStats.from_engine_us(group["processing_us"])))
    if kind == "http":
        add(_times_row("Waiting:", s.ttfb_ms))
    add(_times_row("Total:", s.latency_ms))
    _latency_pair_lines(r, add)
    if s.percentiles_ms:
        add("")
        corrected = " (from the intended start)" if _pacer(r) else ""
        add(f"Percentage of the operations served within a certain time (ms){corrected}")
        for q, v in s.percentiles_ms:
            suffix = " (longest operation)" if q >= 100.0 else ""
            add(f"  {q:6g}% {v:10.3f}{suffix}")
    counts = interval_counts(s)
    if len(counts) >= 2:
        add("")
        add(f"Succeeded per {s.interval_s:g} s interval ({len(counts)} intervals)")
        add(
            f"  min {min(counts)}  median {statistics.median(counts):g}  mean {statistics.fmean(counts):.1f}"
            f"  sd {statistics.pstdev(counts):.1f}  max {max(counts)}"
        )
        add(_histogram_lines(counts))
    if s.hung_clients:
        shown = ", ".join(str(c) for c in s.hung_clients[:20])
        more = f" … and {len(s.hung_clients) - 20} more" if len(s.hung_clients) > 20 else ""
        add("")
        add(f"Clients that hung: {shown}{more}")
    if s.error_samples:
        add("")
        add("Error samples")
        for cls, msgs in s.error_samples.items():
            for m in msgs[:3]:
                add(f"  [{cls}] {m[:200]}")
    return "\n".join(lines)


def _histogram_lines(counts: list[int], bins: int = 8, width: int = 40) -> str:
    """A small text histogram of per-interval counts (the distribution users plot by hand)."""
    lo, hi = min(counts), max(counts)
    if lo == hi:
        return f"  {lo:>8} | {'#' * width} {len(counts)}"
    step = (hi - lo) / bins
    hist = [0] * bins
    for c in counts:
        hist[min(bins - 1, int((c - lo) / step))] += 1
    top = max(hist)
    out = []
    for i, h in enumerate(hist):
        edge = lo + i * step
        out.append(f"  {edge:>8.0f} | {'#' * round(width * h / top):<{width}} {h}")
    return "\n".join(out)


def to_json(r: RunResult) -> dict[str, Any]:
    s = r.stats
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "knee_version": __version__,
        "target": _target(r.spec),
        "clients": s.clients,
        "interrupted": r.interrupted,
        "succeeded": s.succeeded,
        "failed": s.failed,
        "hung": s.hung,
        "elapsed_s": s.elapsed_s,
        "rate_hz": s.rate_hz,
        "failures": s.failures,
        "error_samples": s.error_samples,
        "latency_ms": s.latency_ms.model_dump(),
        "connect_ms": s.connect_ms.model_dump(),
        "ttfb_ms": s.ttfb_ms.model_dump(),
        "percentiles_ms": [[q, v] for q, v in s.percentiles_ms],
        "interval_s": s.interval_s,
        "series": [p.model_dump() for p in s.series],
        "hung_clients": s.hung_clients,
        "per_client": s.per_client,
        "open_loop": open_loop(r),
        "spec": r.spec,
    }


def render_rate_steps(results: list[RunResult]) -> str:
    """One row per rate of `knee run --rate 100,200,400`."""
    lines = ["Rate steps (latency in ms; corrected from the intended start, uncorrected from the actual start)"]
    lines.append(
        f"  {'target/s':>9}{'offered/s':>11}{'achieved/s':>12}{'late':>8}{'dropped':>9}{'failed':>8}"
        f"{'p50':>9}{'p99':>9}{'p99 uncorr':>12}"
    )
    for r in results:
        o = open_loop(r)
        if o is None:
            continue
        c, u = r.stats.latency_ms, LatencyStats(**o["latency_uncorrected_ms"])
        lines.append(
            f"  {o['target_rate_hz']:>9g}{o['offered_rate_hz']:>11.1f}{o['achieved_rate_hz']:>12.1f}"
            f"{o['late']:>8}{o['dropped']:>9}{r.stats.failed + r.stats.hung:>8}{c.p50:>9.3f}{c.p99:>9.3f}{u.p99:>12.3f}"
        )
    return "\n".join(lines)


def steps_to_json(results: list[RunResult]) -> dict[str, Any]:
    """The --json document of several rates: one run document per rate, in order."""
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "knee_version": __version__,
        "target": _target(results[0].spec),
        "interrupted": any(r.interrupted for r in results),
        "rate_steps": [to_json(r) for r in results],
    }
