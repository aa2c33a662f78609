"""The report of one level (`knee run`): ab's layout, plus what ab cannot tell.

`render(scenario, step)` returns the text the terminal shows for one step; `to_json` the `--json`
document (`RunJson`, whose schema is schemas/knee-run.schema.json); `render_rate_steps` the table of
`knee run --rate 100,200,400`. The scenario is the recorded one and the engine spec the step's recorded
one (`StepResult.spec`), both with secrets as placeholders: nothing here can print a secret, and nothing
here asks the planner what ran.
"""

from __future__ import annotations

import statistics
from typing import Any, Literal

from pydantic import BaseModel, Field

from knee import fmt
from knee._engine import __version__
from knee.analysis.levels import measured_s, pool
from knee.analysis.mix import request_rows
from knee.analysis.ranout import ran_out_words
from knee.analysis.slo import missed
from knee.analysis.stats import interval_counts
from knee.model import (
    DataUse,
    GeneratorStats,
    GroupStats,
    LatencyStats,
    Reason,
    RequestStats,
    SeriesPoint,
    StepResult,
)
from knee.scenario import (
    DEFAULT_MAX_IN_FLIGHT,
    CommandGroup,
    GrpcGroup,
    HttpGroup,
    NetworkGroup,
    PythonGroup,
    Scenario,
    TcpGroup,
    UrlGroup,
    WebsocketGroup,
    WorkerGroup,
    tlsfiles,
)
from knee.spec import ClientSpec, EngineSpec, HttpClient

# 3: latency_ms and percentiles_ms are of succeeded operations; failed_latency_ms holds the failures'
JSON_SCHEMA_VERSION: Literal[3] = 3


class OpenLoopJson(BaseModel):
    target_rate_hz: float = Field(description="the rate asked for; under a rate profile its mean over the window")
    profile: str | None = Field(default=None, description="the rate profile the arrivals followed, as written")
    poisson: bool
    max_in_flight: int = Field(description="arrivals beyond this many waiting or running are dropped")
    offered: int = Field(description="arrivals due inside the measured window")
    offered_rate_hz: float
    achieved_rate_hz: float = Field(description="(succeeded + failed + hung) / elapsed_s")
    late: int = Field(description="operations started more than 10 ms after their intended start")
    lagged: int = Field(default=0, description="of the late, those issued while a client was free: knee's own lag")
    dropped: int = Field(description="arrivals never started: over --max-in-flight, or waited past --timeout")
    latency_uncorrected_ms: LatencyStats = Field(description="succeeded operations' latency from the actual start")


class SloJson(BaseModel):
    """`knee run --slo-p99 / --slo-failure-ratio`: the limits, what the run measured against them, the outcome."""

    p99_ms: float | None = Field(description="the SLO's limit on p99 latency (ms); null: none")
    failure_ratio: float | None = Field(description="the SLO's limit on (failed + hung) / completed; null: none")
    measured_p99_ms: float
    measured_failure_ratio: float = Field(description="(failed + hung) / (succeeded + failed + hung)")
    met: bool = Field(description="false: knee run exits 3")
    missed: list[str] = Field(description="what the run missed, in words; empty when it met the SLO")


class RunJson(BaseModel):
    """`knee run --json`: one level of load against one target."""

    schema_version: Literal[3] = JSON_SCHEMA_VERSION
    knee_version: str
    target: str = Field(description="method and URL, tcp://addr, or the command line")
    clients: int
    interrupted: bool = Field(description="true when Ctrl-C ended the run early")
    started: int = Field(description="succeeded + failed + hung + abandoned: what the service saw (warm-up aside)")
    succeeded: int
    failed: int
    hung: int = Field(description="operations that exceeded --timeout and were abandoned or killed")
    abandoned: int = Field(description="operations in flight when the run ended or was stopped")
    warmup_ops: int = Field(description="operations that ended during --warmup (not measured)")
    resent: int = Field(
        default=0,
        description="HTTP/1.1 requests sent again after the service closed a kept connection before answering: "
        "it saw up to this many more than started + warmup_ops",
    )
    elapsed_s: float
    rate_hz: float = Field(description="succeeded / elapsed_s, or / the seconds until the data ran out")
    failures: dict[str, int] = Field(description="error class -> count")
    error_samples: dict[str, list[str]]
    reasons: list[Reason] = Field(description="failures by class and normalised message, most frequent first")
    bytes_sent: int
    bytes_received: int
    payload_bytes: int = Field(description="document bytes of succeeded operations")
    messages_sent: int = Field(default=0, description="WebSocket: data messages written by completed operations")
    messages_received: int = Field(default=0, description="WebSocket: data messages read by completed operations")
    tls_resumed: int = Field(description="TLS handshakes (of tls_ms.count) that resumed an earlier session")
    transfer_rate_bps: float = Field(description="bytes_received / elapsed_s (or until the data ran out)")
    latency_ms: LatencyStats = Field(description="succeeded operations only (count = succeeded)")
    failed_latency_ms: LatencyStats = Field(description="failed operations, apart (count = failed)")
    connect_ms: LatencyStats = Field(description="every operation that connected, succeeded or failed: the TCP connect")
    tls_ms: LatencyStats = Field(description="every operation that completed a TLS handshake, succeeded or failed")
    ttfb_ms: LatencyStats = Field(description="every HTTP operation that got a response head, succeeded or failed")
    processing_ms: LatencyStats = Field(description="succeeded operations: latency less connect and handshake time")
    steps: dict[str, LatencyStats] = Field(description="worker clients: named steps the client program timed")
    percentiles_ms: list[tuple[float, float]] = Field(
        description="[percent, milliseconds] up to 100, of the succeeded operations' latency"
    )
    interval_s: float
    series: list[SeriesPoint]
    hung_clients: list[int]
    per_client: list[int]
    open_loop: OpenLoopJson | None = Field(description="open-loop figures (--rate); null for a closed loop")
    generator: GeneratorStats
    spec: dict[str, Any] = Field(description="the engine spec that ran (docs/engine-spec.md), secrets as placeholders")
    run_dir: str | None = Field(default=None, description="the run directory (--out), if kept")
    slo: SloJson | None = Field(default=None, description="the SLO and its outcome (--slo-p99 …); null: none given")
    requests: dict[str, RequestStats] = Field(
        default_factory=dict, description="a request mix: each request's counts, failures and latency, by name"
    )
    ran_out: str | None = Field(default=None, description="the data source whose running out ended the run")
    data: list[DataUse] = Field(default_factory=list, description="what each data source did: rows used, ran out")


# What `knee run --json` says as the group's stats say it (open_loop is reshaped: `open_loop()`).
_AS_IN_GROUP = sorted((RunJson.model_fields.keys() & GroupStats.model_fields.keys()) - {"open_loop"})


class RunStepsJson(BaseModel):
    """`knee run --rate 100,200,400 --json`: one run document per rate, in order."""

    schema_version: Literal[3] = JSON_SCHEMA_VERSION
    knee_version: str
    target: str
    interrupted: bool
    rate_steps: list[RunJson]
    run_dir: str | None = None
    slo_met: bool | None = Field(default=None, description="every rate met the SLO; null: no SLO given")


def client(step: StepResult | None, group: str) -> ClientSpec | None:
    """The client spec a group of the step ran, as recorded (None in a run.json written before steps kept it)."""
    if step is None or step.spec is None:
        return None
    return next((g.client for g in EngineSpec.model_validate(step.spec).groups if g.name == group), None)


def target(scenario: Scenario, group: str, step: StepResult | None = None) -> str:
    """The target in words: 'GET http://…', 'tcp://addr' or the command line."""
    g = scenario.groups[group]
    if isinstance(g, HttpGroup):
        c = client(step, group)
        return f"{c.method} {g.url}" if isinstance(c, HttpClient) else g.url
    if isinstance(g, TcpGroup):
        return f"tcp://{g.addr}"
    if isinstance(g, WebsocketGroup):
        shape = {"session": f", {g.messages} messages", "listen": f", held {g.hold or 0:g} s"}.get(g.mode, "")
        return f"{g.url} ({g.mode}{shape})"
    if isinstance(g, GrpcGroup):
        streamed = f", {g.stream_messages} messages a call" if g.stream_messages > 1 else ""
        return f"{g.url} (gRPC{streamed})"
    if isinstance(g, PythonGroup):
        return f"python flow {g.function}"
    assert isinstance(g, CommandGroup)
    return ("worker " if isinstance(g, WorkerGroup) else "") + " ".join(g.argv)


def _stop_rule(scenario: Scenario, group: str) -> str:
    g, sw = scenario.groups[group], scenario.sweep
    per_client = g.per_client or sw.per_client
    total = g.total or sw.total
    duration = g.duration if g.duration is not None else sw.duration
    if per_client is not None:
        return f"{per_client} operations per client"
    if total is not None:
        return f"{total} operations in all"
    if duration == "auto":
        low, high = sw.duration_bounds()
        return f"until settled ({low:g}–{high:g} s)"
    return f"{duration or 0:g} s"


def _times_row(name: str, s: LatencyStats) -> str:
    if s.count == 0:
        return f"{name:<12}{'-':>8}{'-':>8}{'-':>8}{'-':>8}{'-':>8}"
    return f"{name:<12}{s.min:8.1f}{s.mean:8.1f}{s.stdev:8.1f}{s.p50:8.1f}{s.max:8.1f}"


def open_loop(scenario: Scenario, step: StepResult, g: GroupStats) -> OpenLoopJson | None:
    """The open-loop figures of a step (None for a closed loop)."""
    o = g.open_loop
    if o is None:
        return None
    p = scenario.groups[g.name].profile if g.name in scenario.groups else None
    warm, seconds = scenario.sweep.warmup, g.elapsed_s
    mean = (p.integral(warm + seconds) - p.integral(warm)) / seconds if p is not None and seconds > 0 else 0.0
    return OpenLoopJson(
        target_rate_hz=float(step.level) if p is None else mean,
        profile=None if p is None else p.text + (" (steps)" if p.step else ""),
        poisson=scenario.sweep.arrival == "poisson",
        max_in_flight=scenario.sweep.max_in_flight or DEFAULT_MAX_IN_FLIGHT,
        offered=o.offered,
        offered_rate_hz=o.offered_rate_hz,
        achieved_rate_hz=o.achieved_rate_hz,
        late=o.late,
        lagged=o.lagged,
        dropped=o.dropped,
        latency_uncorrected_ms=o.latency_uncorrected_ms,
    )


def render(scenario: Scenario, step: StepResult, group: str | None = None) -> str:
    group = group or scenario.measured_group  # a scenario file's groups have names of their own
    s = step.groups[group]
    g = scenario.groups[group]
    lines: list[str] = []
    add = lines.append
    if step.partial:
        add("Interrupted: the figures below cover the part of the run that completed.")
        add("")
    mode = ""
    if isinstance(g, HttpGroup):
        mode = " (new connection per request)" if g.new_connection else " (keep-alive)"
        if g.http2:
            shared = f", {g.streams} streams per connection" if g.streams > 1 else ""
            mode = f" (HTTP/2{shared}{', new connection per request' if g.new_connection else ''})"
    add(f"{'Target:':<28}{target(scenario, group, step)}")
    add(f"{'Clients:':<28}{s.clients}{mode}")
    add(f"{'Stop rule:':<28}{_stop_rule(scenario, group)}")
    seconds = measured_s(step, s)  # the run's time, or until its data ran out
    until = f" (its data ran out after {seconds:.3f} s)" if seconds < s.elapsed_s else ""
    add(f"{'Time taken:':<28}{s.elapsed_s:.3f} s{until}")
    add(f"{'Started operations:':<28}{s.started}  (succeeded + failed + hung + abandoned)")
    add(f"{'Complete operations:':<28}{s.total}")
    add(f"{'Succeeded:':<28}{s.succeeded}")
    failed = f"{s.failed}"
    if s.failures:
        failed += "  (" + ", ".join(f"{k}: {v}" for k, v in sorted(s.failures.items(), key=lambda kv: -kv[1])) + ")"
    add(f"{'Failed:':<28}{failed}")
    add(f"{'Hung (timed out):':<28}{s.hung}")
    add(f"{'Abandoned (in flight):':<28}{s.abandoned}")
    out = ran_out_words(step, s)
    if out is not None:
        add(f"{'Data ran out:':<28}{out}; the run ended there (its rates are over the seconds before)")
    if s.warmup_ops:
        add(f"{'Warm-up (not measured):':<28}{s.warmup_ops}")
    if s.resent:
        add(f"{'Sent again:':<28}{s.resent}  (a kept connection closed before an answer: the service may have read")
        add(f"{'':<28}up to these more, and a worker that died on one would not show)")
    if s.tls_ms.count:
        full = s.tls_ms.count - s.tls_resumed
        add(f"{'TLS handshakes:':<28}{s.tls_ms.count}  ({full} full, {s.tls_resumed} resumed)")
    o = open_loop(scenario, step, s)
    if o is not None:
        shape = "Poisson" if o.poisson else "constant"
        cap = f", at most {o.max_in_flight} in flight" if o.max_in_flight else ""
        asked = f"profile {o.profile}, mean {o.target_rate_hz:.4g}/s" if o.profile else f"target {o.target_rate_hz:g}/s"
        add(f"{'Offered rate:':<28}{o.offered_rate_hz:.2f} [#/sec] ({o.offered} arrivals; {asked}, {shape}{cap})")
        add(f"{'Achieved rate:':<28}{o.achieved_rate_hz:.2f} [#/sec] (completed operations)")
        lag = f"  ({o.lagged} of them with a client free: knee's own lag, not the service)" if o.lagged else ""
        add(f"{'Late (> 10 ms after due):':<28}{o.late}{lag}")
        add(f"{'Dropped (never started):':<28}{o.dropped}")
    if s.succeeded and (s.payload_bytes or s.bytes_received):
        add(f"{'Document length:':<28}{s.payload_bytes / s.succeeded:.0f} bytes (mean)")
    if s.messages_received or s.messages_sent:
        each = f" ({s.messages_received / seconds:.2f} received [#/sec])" if seconds > 0 else ""
        add(f"{'Messages:':<28}{s.messages_received} received, {s.messages_sent} sent{each}")
    if s.bytes_received or s.bytes_sent:
        add(f"{'Total transferred:':<28}{s.bytes_received} bytes received, {s.bytes_sent} sent")
        if s.elapsed_s > 0:
            add(f"{'Transfer rate:':<28}{fmt.transfer(s.bytes_received / (seconds or s.elapsed_s))} received")
    rate = s.succeeded / seconds if seconds > 0 else 0.0
    add(f"{'Operations per second:':<28}{rate:.2f} [#/sec] (succeeded, mean)")
    if s.latency_ms.count:
        add(f"{'Time per operation:':<28}{s.latency_ms.mean:.3f} [ms] (mean, succeeded)")
        if rate > 0:
            add(f"{'Time per operation:':<28}{1000.0 / rate:.3f} [ms] (mean, across all concurrent clients)")
    lines.extend(_requests_lines(step, s))
    add("")
    add("Connection Times (ms)")
    add(f"{'':<12}{'min':>8}{'mean':>8}{'[+/-sd]':>8}{'median':>8}{'max':>8}")
    if isinstance(g, NetworkGroup):
        add(_times_row("Connect:", s.connect_ms))
    if tlsfiles.https(g):
        add(_times_row("TLS:", s.tls_ms))
    add(_times_row("Processing:", s.processing_ms))
    if isinstance(g, UrlGroup):
        add(_times_row("Waiting:", s.ttfb_ms))
    add(_times_row("Total:", s.latency_ms))
    if s.failed_latency_ms.count:
        add(_times_row("Failed:", s.failed_latency_ms))
        add("(Processing and Total: succeeded operations only; Failed: the failed ones' total time)")
    if o is not None and s.latency_ms.count:
        c, u = s.latency_ms, o.latency_uncorrected_ms
        add("")
        add("Latency (ms)                  p50       p99       max")
        add(f"  {'corrected':<24}{c.p50:10.3f}{c.p99:10.3f}{c.max:10.3f}  (from the intended start)")
        add(f"  {'uncorrected':<24}{u.p50:10.3f}{u.p99:10.3f}{u.max:10.3f}  (from the actual start)")
    if s.steps:
        add("")
        add("Timed steps (ms), reported by the client program     share: of all the operations' time")
        add(f"  {'step':<16}{'count':>8}{'min':>9}{'mean':>9}{'p50':>9}{'p99':>9}{'max':>9}{'share':>10}")
        for name, st in s.steps.items():
            share = step_share(st, s)
            add(
                f"  {name[:16]:<16}{st.count:>8}{st.min:>9.3f}{st.mean:>9.3f}{st.p50:>9.3f}{st.p99:>9.3f}"
                f"{st.max:>9.3f}{fmt.pct(share):>10}"
            )
        add(f"  {'(operation)':<16}{s.latency_ms.count:>8}{s.latency_ms.min:>9.3f}{s.latency_ms.mean:>9.3f}"
            f"{s.latency_ms.p50:>9.3f}{s.latency_ms.p99:>9.3f}{s.latency_ms.max:>9.3f}")  # fmt: skip
    if s.percentiles_ms:
        add("")
        corrected = " (from the intended start)" if o is not None else ""
        add(f"Percentage of the operations served within a certain time (ms), of the succeeded ones{corrected}")
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
    if s.reasons:
        add("")
        add("Failure reasons")
        for r in s.reasons[:10]:
            add(f"  {r.count:>8,} × [{r.class_}] {r.sample[:200]}")
        if len(s.reasons) > 10:
            add(f"  … and {len(s.reasons) - 10} more")
    return "\n".join(lines)


def _requests_lines(step: StepResult, g: GroupStats) -> list[str]:
    """A request mix: a row per request (counted apart by the engine), its failures by class after it."""
    rows = request_rows(step, g)
    if not rows:
        return []
    out = ["", "Requests (the mix; latency in ms, of the succeeded ones)"]
    out.append(f"  {'request':<16}{'succeeded':>10}{'failed':>8}{'hung':>6}{'abandoned':>10}{'rate/s':>10}"
               f"{'p50':>9}{'p99':>9}  failures")  # fmt: skip
    for r in rows:
        failures = ", ".join(f"{k}: {n}" for k, n in sorted(r.failures.items(), key=lambda kv: -kv[1]))
        latency = f"{r.p50_ms:>9.3f}{r.p99_ms:>9.3f}" if r.latency_count else f"{'-':>9}{'-':>9}"
        out.append(
            f"  {r.name[:16]:<16}{r.succeeded:>10}{r.failed:>8}{r.hung:>6}{r.abandoned:>10}{r.rate_hz:>10.2f}"
            f"{latency}  {failures}".rstrip()
        )
    return out


def step_share(step: LatencyStats, g: GroupStats) -> float:
    """The share of all the operations' time spent in a step (steps run in some operations only; a step is timed
    in failed operations too, so their time counts in the whole)."""
    whole = g.operations_ms
    return step.mean * step.count / whole if whole > 0 else 0.0


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


def to_json(scenario: Scenario, step: StepResult, group: str | None = None, run_dir: str | None = None) -> RunJson:
    group = group or scenario.measured_group
    s = step.groups[group]
    # per second of the time measured: the run's, or until its data ran out (as the text says it)
    seconds = measured_s(step, s)
    fields = {key: getattr(s, key) for key in _AS_IN_GROUP}
    fields["rate_hz"] = s.succeeded / seconds if seconds > 0 else 0.0
    return RunJson(
        **fields,
        knee_version=__version__,
        target=target(scenario, group, step),
        interrupted=step.partial,
        started=s.started,
        transfer_rate_bps=s.bytes_received / seconds if seconds > 0 else 0.0,
        open_loop=open_loop(scenario, step, s),
        generator=step.generator,
        spec=step.spec or {},
        run_dir=run_dir,
        slo=slo_check(scenario, step, group),
        data=step.data,
    )


def steps_to_json(scenario: Scenario, steps: list[StepResult], run_dir: str | None = None) -> RunStepsJson:
    """The --json document of several rates: one run document per rate, in order."""
    docs = [to_json(scenario, s) for s in steps]
    return RunStepsJson(
        knee_version=__version__,
        target=target(scenario, scenario.measured_group, next(iter(steps), None)),
        interrupted=any(s.partial for s in steps),
        rate_steps=docs,
        run_dir=run_dir,
        slo_met=None if scenario.slo is None else all(d.slo is not None and d.slo.met for d in docs),
    )


def slo_check(scenario: Scenario, step: StepResult, group: str | None = None) -> SloJson | None:
    """The step against the scenario's SLO (knee.analysis.slo, as a sweep judges a level), on its measured group;
    None without one."""
    group = group or scenario.measured_group
    slo = scenario.slo
    rows = pool([step], group, step.direction, every=True)
    if slo is None or not rows:
        return None
    row = rows[0]
    return SloJson(
        p99_ms=slo.p99_ms,
        failure_ratio=slo.failure_ratio,
        measured_p99_ms=row.p99_ms,
        measured_failure_ratio=row.failure_ratio,
        missed=missed(slo, row),
        met=not missed(slo, row),
    )


def render_slo(scenario: Scenario, step: StepResult, check: SloJson, several: bool = False) -> str:
    """'SLO (p99 ≤ 200 ms, failures ≤ 1 %): met' or '…: missed: failed or hung 100 % > 1 %', with the rate in
    front when the run had several."""
    assert scenario.slo is not None
    at = f" at {fmt.level_rate(step.level)}" if several else ""
    outcome = "met" if check.met else "missed: " + ", ".join(check.missed)
    return f"SLO ({scenario.slo.describe()}){at}: {outcome}"


def render_rate_steps(scenario: Scenario, steps: list[StepResult], group: str | None = None) -> str:
    """One row per rate of `knee run --rate 100,200,400`."""
    group = group or scenario.measured_group
    lines = ["Rate steps (latency in ms; corrected from the intended start, uncorrected from the actual start)"]
    lines.append(
        f"  {'target/s':>9}{'offered/s':>11}{'achieved/s':>12}{'late':>8}{'lagged':>8}{'dropped':>9}{'failed':>8}"
        f"{'p50':>9}{'p99':>9}{'p99 uncorr':>12}"
    )
    for step in steps:
        s = step.groups[group]
        o = open_loop(scenario, step, s)
        if o is None:
            continue
        c, u = s.latency_ms, o.latency_uncorrected_ms
        lines.append(
            f"  {o.target_rate_hz:>9g}{o.offered_rate_hz:>11.1f}{o.achieved_rate_hz:>12.1f}"
            f"{o.late:>8}{o.lagged:>8}{o.dropped:>9}{s.failed + s.hung:>8}{c.p50:>9.3f}{c.p99:>9.3f}{u.p99:>12.3f}"
        )
    return "\n".join(lines)
