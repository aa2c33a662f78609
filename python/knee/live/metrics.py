"""`/metrics`: the live view in Prometheus' text exposition format (version 0.0.4), for a Prometheus to scrape.

Counters are per group and step (labels `group`, `step`: run.json's `steps[].index`, `level`), so a step's
series starts at 0 and ends at run.json's numbers for that step; summing over `step` gives the run's. The
current step counts from its last snapshot (outcomes, failures by class, an open loop's late arrivals); a finished
step from its record (its latency histogram then too: the engine's live snapshot holds none). Gauges are of the step
running now. Names follow Prometheus' conventions: `_total` counters, base units (`_seconds`), the unit before the
suffix.

The latency histogram's buckets are fixed (`BUCKETS_S`, docs/live.md) and filled from the step's HdrHistogram
(`knee.live.hdr`), of the succeeded operations as every latency knee reports.
"""

from __future__ import annotations

import math
import threading

from knee.live.hdr import Buckets, HistogramError, buckets
from knee.live.state import Hub, LiveView
from knee.model import StepResult

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# The latency histogram's upper bounds, in seconds (the +Inf bucket follows)
BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
OUTCOMES = ("succeeded", "failed", "hung", "abandoned")

# Each metric's help, in the order of the text; its type follows from its name: a counter's ends in `_total`, the
# histograms are named in _HISTOGRAMS, every other metric is a gauge.
_HELP = {
    "knee_run_info": "The run: its id and knee's version (always 1).",
    "knee_running": "1 while the run goes, 0 once it has ended.",
    "knee_step": "The index (run.json steps[].index) of the step running now; -1 between steps.",
    "knee_level": "The level of the step running now: its clients, or its offered rate (/s) in a rate sweep.",
    "knee_clients": "The clients of each group in the step running now.",
    "knee_in_flight_operations": "Operations started and not yet ended, per group, in the step running now.",
    "knee_offered_operations_per_second": "An open-loop group's arrival rate in the step running now.",
    "knee_achieved_operations_per_second": "Operations that ended (succeeded, failed or hung) per second over the "
    "last interval, per group.",
    "knee_latency_p50_seconds": "The median latency of succeeded operations over the last second.",
    "knee_latency_p99_seconds": "The 99th percentile latency of succeeded operations over the last second.",
    "knee_operations_total": "Operations that ended, per group, step and outcome (succeeded, failed, hung, abandoned).",
    "knee_operations_started_total": "Operations started and ended: succeeded + failed + hung + abandoned (those in "
    "flight are not yet counted).",
    "knee_failures_total": "Failed operations of a step, per group and failure class.",
    "knee_late_arrivals_total": "An open-loop group's arrivals of a step that started more than 10 ms after their "
    "intended start.",
    "knee_lagged_arrivals_total": "Of an open-loop group's late arrivals, those a client was free for: knee's own lag, "
    "not the service's.",
    "knee_latency_seconds": "Latency of a finished step's succeeded operations, per group.",
    "knee_process_cpu_seconds_total": "knee's own CPU time (user + system).",
    "knee_children_cpu_seconds_total": "The CPU time of knee's child processes that ended (exec clients).",
}
_HISTOGRAMS = {"knee_latency_seconds"}


def _kind(name: str) -> str:
    return "counter" if name.endswith("_total") else "histogram" if name in _HISTOGRAMS else "gauge"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: object) -> str:
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items()) + "}" if labels else ""


def _num(x: float) -> str:
    if isinstance(x, int):
        return str(x)
    if math.isnan(x) or math.isinf(x):
        return "NaN" if math.isnan(x) else ("+Inf" if x > 0 else "-Inf")
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


def _level(level: float) -> str:
    return f"{level:g}"


class Metrics:
    """The text of `/metrics` for a hub's views, made once per view (several scrapers read the same text) and
    with each finished step's histogram decoded once."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._lock = threading.Lock()
        self._text: tuple[int, str] = (0, "")
        # decoded once a version: a soak's one step is saved again each interval, its histogram file with it
        self._buckets: dict[tuple[int, str], Buckets | None] = {}
        self._buckets_version = 0

    def text(self) -> str:
        view = self.hub.view
        with self._lock:
            if self._text[0] != view.seq:
                self._text = (view.seq, self._render(view))
            return self._text[1]

    def _histogram(self, index: int, group: str) -> Buckets | None:
        key = (index, group)
        if key not in self._buckets:
            data = self.hub.histogram(index, group)
            try:
                self._buckets[key] = buckets(data, tuple(b * 1e6 for b in BUCKETS_S)) if data else None
            except HistogramError:
                self._buckets[key] = None
        return self._buckets[key]

    def _render(self, view: LiveView) -> str:
        if view.version != self._buckets_version:
            self._buckets, self._buckets_version = {}, view.version
        out = _Lines()
        r = view.record
        out.add("knee_run_info", 1, run_id=r.run_id, version=r.knee_version)
        out.add("knee_running", 0 if view.ended else 1)
        now = view.current
        out.add("knee_step", now.index if now is not None else -1)
        if now is not None:
            out.add("knee_level", now.level, unit=r.level_unit)
            for g in now.groups:
                out.add("knee_clients", g.clients, group=g.name)
                out.add("knee_in_flight_operations", g.in_flight, group=g.name)
                if g.offered_hz is not None:
                    out.add("knee_offered_operations_per_second", g.offered_hz, group=g.name)
                out.add("knee_achieved_operations_per_second", round(g.completed_hz, 3), group=g.name)
                if g.p99_ms > 0:  # else nothing succeeded in the last second: no latency, not a latency of 0
                    out.add("knee_latency_p50_seconds", g.p50_ms / 1000, group=g.name)
                    out.add("knee_latency_p99_seconds", g.p99_ms / 1000, group=g.name)
                step = {"group": g.name, "step": now.index, "level": _level(now.level)}
                for outcome in OUTCOMES:
                    out.add("knee_operations_total", getattr(g, outcome), **step, outcome=outcome)
                out.add("knee_operations_started_total", g.started, **step)
                for cls, n in sorted(g.failed_by_class):
                    out.add("knee_failures_total", n, **step, **{"class": cls})
                if g.offered_hz is not None:
                    out.add("knee_late_arrivals_total", g.late, **step)
                    out.add("knee_lagged_arrivals_total", g.lagged, **step)
        for s in view.steps:
            if now is None or s.index != now.index:  # a soak's step, saved as it runs, is the current one
                self._finished(s, out)
        out.add("knee_process_cpu_seconds_total", round(view.usage.cpu_s, 3))
        out.add("knee_children_cpu_seconds_total", round(view.usage.children_cpu_s, 3))
        return out.text()

    def _finished(self, s: StepResult, out: _Lines) -> None:
        for name, g in s.groups.items():
            step = {"group": name, "step": s.index, "level": _level(s.level)}
            for outcome in OUTCOMES:
                out.add("knee_operations_total", getattr(g, outcome), **step, outcome=outcome)
            out.add("knee_operations_started_total", g.started, **step)
            for cls, n in sorted(g.failures.items()):
                out.add("knee_failures_total", n, **step, **{"class": cls})
            if g.open_loop is not None:
                out.add("knee_late_arrivals_total", g.open_loop.late, **step)
                out.add("knee_lagged_arrivals_total", g.open_loop.lagged, **step)
            h = self._histogram(s.index, name)
            if h is None:
                continue
            latency = "knee_latency_seconds"
            for bound, n in zip(BUCKETS_S, h.cumulative, strict=True):
                out.add(latency, n, "_bucket", **step, le=_num(bound))
            out.add(latency, h.count, "_bucket", **step, le="+Inf")
            out.add(latency, round(h.total / 1e6, 6), "_sum", **step)
            out.add(latency, h.count, "_count", **step)


class _Lines:
    """Samples grouped by metric, in `_HELP`'s order, each metric under its HELP and TYPE lines."""

    def __init__(self) -> None:
        self._samples: dict[str, list[str]] = {name: [] for name in _HELP}

    def add(self, name: str, value: float, suffix: str = "", /, **labels: object) -> None:
        self._samples[name].append(f"{name}{suffix}{_labels(**labels)} {_num(value)}")

    def text(self) -> str:
        lines = []
        for name, samples in self._samples.items():
            if samples:
                lines += [f"# HELP {name} {_HELP[name]}", f"# TYPE {name} {_kind(name)}", *samples]
        return "\n".join(lines) + "\n"
