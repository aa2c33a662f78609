"""Live progress of a sweep: one status line updated from engine snapshots, one line per finished step.

On a terminal the status line is a rich Live display; elsewhere (CI logs, tests)
only the finished-step lines are printed.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from knee import fmt
from knee.analysis.levels import window
from knee.analysis.mix import request_rows
from knee.analysis.ranout import ran_out_words
from knee.analysis.side import spin
from knee.engine import Snapshot
from knee.model import StepResult
from knee.plan import PlannedStep

if TYPE_CHECKING:  # rich is imported when a line is drawn: a run that draws none does not pay for it
    from rich.console import Console
    from rich.live import Live


class Progress(Protocol):
    """What the runner tells whoever shows progress (`SweepProgress`, `knee run`'s `RunProgress`, the live page's
    `LiveProgress`)."""

    def __enter__(self) -> Progress: ...
    def __exit__(self, *exc: object) -> None: ...
    def begin(self, number: int, total: int, step: PlannedStep) -> None: ...
    def update(self, snapshot: Snapshot) -> None: ...
    def end(self, step: StepResult) -> None: ...


class SweepProgress:
    def __init__(
        self, console: Console, step_s: float | None, pause_s: float, rates: bool = False, group: str = "main"
    ) -> None:
        self.console = console
        self.rates = rates
        self.group = group
        self.total_steps = 0
        self.step_s = step_s
        self.pause_s = pause_s
        self._live: Live | None = None
        self._step: PlannedStep | None = None
        self._number = 0
        self._t0 = 0.0
        self._last: tuple[float, int] | None = None

    def __enter__(self) -> SweepProgress:
        if self.console.is_terminal:
            from rich.live import Live
            from rich.text import Text

            self._live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    def begin(self, number: int, total: int, step: PlannedStep) -> None:
        self._number = number
        self.total_steps = total
        self._step = step
        self._t0 = time.monotonic()
        self._last = None
        if step.reason and step.phase == "sweep":  # a searched level: why the search chose it, kept in the log
            self.console.print(f"{self._title()}: {step.reason}", highlight=False, soft_wrap=True, markup=False)
        self._show(f"{self._title()}  starting…")

    def update(self, snapshot: Snapshot) -> None:
        g = snapshot.group(self.group)
        if g is None or self._live is None:
            return
        now = snapshot.elapsed_s
        last_t, last_ok = self._last or (0.0, 0)
        rate = (g.succeeded - last_ok) / (now - last_t) if now > last_t else 0.0
        self._last = (now, g.succeeded)
        line = (
            f"{self._title()} {clock(now)}{self._of()}{self._remaining(now)} | {rate:,.1f}/s"
            f" | ok {g.succeeded:,} failed {g.failed:,} hung {g.hung:,} busy {g.in_flight:,}"
        )
        if snapshot.workers is not None:
            line += f" | workers {snapshot.workers[0]}/{snapshot.workers[1]}"

        self._show(line)

    def end(self, step: StepResult) -> None:
        g = step.groups.get(self.group)
        if g is None:
            return
        tags = []
        if step.partial:
            tags.append("partial")
        if spin(step, self.group) is not None:  # a busy load side is then the spinning's (analysis/side.py)
            tags.append("failing clients spin")
        elif step.generator.saturated:
            tags.append("load side saturated")
        if step.lost_workers:
            tags.append(f"lost {', '.join(step.lost_workers)}")
        if step.skewed and step.start_skew_s is not None:
            tags.append(f"shards started {fmt.ms(step.start_skew_s * 1000)} apart")
        out = ran_out_words(step, g)
        if out is not None:
            tags.append(out)
        tag = f"  [{', '.join(tags)}]" if tags else ""
        label = f" {step.label}" if step.label else ""
        self.console.print(
            f"{step.phase:<8} {step.direction:<4} {_level(step.level, self.rates)}{label}: "
            f"{g.succeeded:,} ok ({fmt.sig3(window(step, g).rate)}/s), {g.failed:,} failed, {g.hung:,} hung, "
            f"{g.abandoned:,} abandoned, p99 {fmt.ms(g.latency_ms.p99)} in {step.elapsed_s:.1f} s{tag}",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
        for r in request_rows(step, g):  # a request mix: a line per request under the step's
            failures = ", ".join(f"{k} {n:,}" for k, n in sorted(r.failures.items(), key=lambda kv: -kv[1]))
            self.console.print(
                f"    {r.name}: {r.succeeded:,} ok ({fmt.sig3(r.rate_hz)}/s), {r.failed:,} failed"
                f"{f' ({failures})' if failures else ''}, {r.hung:,} hung, "
                f"p50 {fmt.ms(r.p50_ms)}, p99 {fmt.ms(r.p99_ms)}",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )

    def _title(self) -> str:
        s = self._step
        if s is None:
            return ""
        label = f" {s.label}" if s.label else ""
        of = f"/{self.total_steps}" if self.total_steps else ""  # a level search does not know how many
        what = "recovery probe" if s.phase == "recovery" else f"step {self._number}{of}"
        return f"{what} {_level(s.level, self.rates)}{label} {s.direction}"

    def _of(self) -> str:
        return f"/{clock(self.step_s)}" if self.step_s else ""

    def _remaining(self, elapsed: float) -> str:
        if not self.step_s or self._step is None or self._step.phase != "sweep" or not self.total_steps:
            return ""
        left = max(0.0, self.step_s - elapsed) + (self.total_steps - self._number) * (self.step_s + self.pause_s)
        return f" (sweep ~{clock(left)} left)" if left >= 1 else ""

    def _show(self, line: str) -> None:
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(line, no_wrap=True, overflow="ellipsis"))


def _level(level: float, rates: bool) -> str:
    """'level     50', or a rate sweep's 'rate  500/s'."""
    return f"rate {f'{level:g}/s':>7}" if rates else f"level {level:>6}"


def clock(seconds: float) -> str:
    """4.2s, 1:05, 2:46:40."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"
