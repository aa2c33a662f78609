"""The progress of `knee run`: one live line on stderr, then each step's ab-style report when it ends."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from knee import fmt
from knee.analysis.side import spin
from knee.engine import Snapshot
from knee.model import StepResult
from knee.plan import PlannedStep
from knee.scenario import Scenario

if TYPE_CHECKING:
    from rich.live import Live


class RunProgress:
    """`knee run`'s progress: a live line while a step runs (when `live`), its report when it ends.
    `headers`: several steps (one per rate) each get a heading."""

    def __init__(self, scenario: Scenario, live: bool = True, headers: bool = False) -> None:
        self.scenario = scenario
        self.live = live
        self.headers = headers
        self._live: Live | None = None
        self._last: tuple[float, int] | None = None
        self._shown = 0

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _close(self) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    def begin(self, number: int, total: int, step: PlannedStep) -> None:
        self._last = None
        if self.live:
            from rich.console import Console  # a terminal's line only: rich is not imported for a quiet run
            from rich.live import Live
            from rich.text import Text

            self._live = Live(Text("starting…"), console=Console(stderr=True), transient=True, auto_refresh=False)
            self._live.__enter__()

    def update(self, snap: Snapshot) -> None:
        if self._live is None:
            return
        ok = sum(g.succeeded for g in snap.groups)
        failed = sum(g.failed for g in snap.groups)
        hung = sum(g.hung for g in snap.groups)
        in_flight = sum(g.in_flight for g in snap.groups)
        rate = 0.0
        if self._last is not None and snap.elapsed_s > self._last[0]:
            rate = (ok - self._last[1]) / (snap.elapsed_s - self._last[0])
        self._last = (snap.elapsed_s, ok)
        p99 = max((g.p99_us for g in snap.groups), default=0) / 1000.0
        from rich.text import Text

        line = Text.assemble(
            (f"{snap.elapsed_s:7.1f} s  ", "bold"),
            (f"{ok} ok", "green"),
            "  ",
            (f"{failed} failed", "red" if failed else ""),
            "  ",
            (f"{hung} hung", "magenta" if hung else ""),
            f"  {rate:,.1f}/s  in flight {in_flight}  p99 {fmt.ms(p99)}",
        )
        self._live.update(line, refresh=True)

    def end(self, step: StepResult) -> None:
        from knee.report import abtext

        self._close()
        if self.headers:
            click.echo(f"{'' if self._shown == 0 else chr(10)}== Rate {fmt.level_rate(step.level)} ==")
        self._shown += 1
        # each group of the step (a scenario's groups have names of their own, not "main"): the measured one first,
        # a background one last
        first, groups = self.scenario.measured_group, self.scenario.groups
        order = list(groups)

        def rank(n: str) -> tuple[bool, bool, int]:
            return (n in groups and groups[n].background, n != first, order.index(n) if n in order else len(order))

        names = sorted(step.groups, key=rank)
        for i, name in enumerate(names):
            head = f"{chr(10) if i else ''}-- group {name} --\n" if len(names) > 1 else ""
            click.echo(head + abtext.render(self.scenario, step, name))
        gen = step.generator
        spun = next((x for name in step.groups if (x := spin(step, name)) is not None), None)
        if spun is not None:  # the busy load side, if any, is the spinning's: one story (analysis/side.py)
            click.echo(
                f"\nwarning: the failing clients spun: their operations failed at once and started again without a "
                f"pause ({spun.words()}); knee and its child processes used {gen.load_cores:.2f} of "
                f"{gen.cores_words()} re-running them. Pause after a failure as a retrying client would: "
                "--think-on-failure DURATION"
            )
        elif gen.saturated:
            click.echo(
                f"\nwarning: the load side was saturated: knee used {gen.cpu_cores:.2f} and its child processes "
                f"{gen.children_cpu_cores:.2f} of {gen.cores_words()}; these numbers measure the load "
                "generator as much as the service (use more or bigger load machines)"
            )
