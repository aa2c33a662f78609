"""What a run watches of the target each step, besides its own load: the target's process tree on this machine
(`[monitor]` pid or name: `TargetMonitor`) and the target's machines through their Prometheus exporters (`[monitor]
prometheus`: `RemoteMonitor`). `StepWatch` starts and stops both with each step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from knee.machine.monitor import TargetMonitor
from knee.model import RemoteStats, TargetStats
from knee.scenario.machines import Monitor

if TYPE_CHECKING:
    from rich.console import Console

    from knee.machine.remote import RemoteMonitor

# What a step's watch saw: the target's process tree (None: not watched), each endpoint's figures
Watched = tuple[TargetStats | None, list[RemoteStats]]


class StepWatch:
    """The scenario's `[monitor]`: made before the first step (a process not found is a UserError; an endpoint that
    cannot be scraped is a warning on `console`), started and stopped with each step."""

    def __init__(self, monitor: Monitor, console: Console) -> None:
        self.target = TargetMonitor(monitor.pid, monitor.name) if monitor.enabled else None
        if self.target is not None:
            proc = self.target.proc
            console.print(
                f"monitoring the target: pid {proc.pid} ({proc.name()}) and its children",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )
        self.remote: RemoteMonitor | None = None
        if monitor.prometheus:  # the scraper is imported only when there is something to scrape
            from knee.machine.remote import RemoteMonitor

            self.remote = RemoteMonitor(monitor.prometheus, monitor.metrics)
        for w in self.remote.probe() if self.remote is not None else []:
            from rich.markup import escape

            console.print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True, highlight=False)

    def start(self) -> None:
        if self.target is not None:
            self.target.start()
        if self.remote is not None:
            self.remote.start()

    def stop(self) -> Watched:
        """The step's figures: the target's process tree, each endpoint's."""
        return (
            self.target.stop() if self.target is not None else None,
            self.remote.stop() if self.remote is not None else [],
        )
