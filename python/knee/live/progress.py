"""The runner's side of the live page: a `Progress` that passes everything on to the one it wraps (the terminal's)
and publishes each step's start, each snapshot (about once a second) and each step's end to the `Hub`.

Everything here runs on the runner's thread and stays small: a view of a few numbers per group, swapped in. The
report of the record (its plots, the analysis) is rendered elsewhere (`knee.live.render`), when someone reads it.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, replace

from knee.analysis.client_ramp import clients_at
from knee.engine import ShardResult, Snapshot
from knee.live.state import GroupNow, Hub, Point, StepNow
from knee.machine.remote import RemoteMonitor
from knee.model import RunRecord, StepResult
from knee.plan import PlannedStep, engine_spec, step_seconds
from knee.progress import Progress
from knee.scenario import Scenario
from knee.spec import RatePacer


@dataclass(eq=False)
class LiveProgress:
    """`inner`'s progress, published to `hub` too. `results`: the runner's engine results, in the order its steps
    ran (the last one is the step that just ended: its histograms go to `/metrics`)."""

    inner: Progress
    hub: Hub
    _: KW_ONLY
    scenario: Scenario
    record: RunRecord
    results: list[ShardResult]
    remote: RemoteMonitor | None = None
    _clients: dict[str, tuple[int, float | None]] = field(default_factory=dict, init=False)
    _points: list[Point] = field(default_factory=list, init=False)
    _last: tuple[float, dict[str, tuple[int, int]]] | None = field(default=None, init=False)

    def __enter__(self) -> LiveProgress:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)

    def begin(self, number: int, total: int, step: PlannedStep) -> None:
        self.inner.begin(number, total, step)
        spec = engine_spec(self.scenario, step, continuous=True)
        self._clients = {
            g.name: (g.clients, g.pacer.rate_hz if isinstance(g.pacer, RatePacer) else None) for g in spec.groups
        }
        self._points = []
        self._last = None
        now = StepNow(
            index=self.hub.view.next_index(),
            number=number,
            total=total,
            **{key: getattr(step, key) for key in ("level", "label", "phase", "direction", "reason")},
            planned_s=step_seconds(self.scenario) if step.phase == "sweep" else None,
            groups=tuple(GroupNow(n, c, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, r) for n, (c, r) in self._clients.items()),
        )
        self.hub.publish(current=now, points=self._points)

    def update(self, snapshot: Snapshot) -> None:
        self.inner.update(snapshot)
        current = self.hub.view.current
        if current is None:
            return
        t = snapshot.elapsed_s
        last_t, last = self._last or (0.0, {})
        dt = t - last_t
        groups = []
        for g in snapshot.groups:
            ok0, done0 = last.get(g.name, (0, 0))
            clients, offered = self._now(g.name, t)
            groups.append(
                GroupNow(
                    name=g.name,
                    clients=clients,
                    **{key: getattr(g, key) for key in ("succeeded", "failed", "hung", "abandoned", "in_flight")},
                    late=g.late,
                    lagged=g.lagged,
                    p50_ms=g.p50_us / 1000.0,
                    p99_ms=g.p99_us / 1000.0,
                    rate_hz=(g.succeeded - ok0) / dt if dt > 0 else 0.0,
                    completed_hz=(g.total - done0) / dt if dt > 0 else 0.0,
                    offered_hz=offered,
                    failed_by_class=tuple(sorted(g.failed_by_class.items(), key=lambda kv: (-kv[1], kv[0]))),
                )
            )
        self._last = (t, {g.name: (g.succeeded, g.total) for g in snapshot.groups})
        self._points.append((round(t, 3), tuple((g.succeeded, g.failed, g.hung) for g in snapshot.groups)))
        step = replace(
            current, elapsed_s=t, groups=tuple(groups), workers=snapshot.workers, shards=tuple(snapshot.shards or ())
        )
        self.hub.publish(current=step, points=self._points, remote=self.remote.now() if self.remote else ())

    def _now(self, name: str, t: float) -> tuple[int, float | None]:
        """Group `name`'s clients and offered rate `t` seconds into the step: a profile's value then (a clients
        profile runs its floor), else the step's constant ones. A background group's profile runs on its own clock,
        across steps: its constant ones."""
        clients, offered = self._clients.get(name, (0, None))
        g = self.scenario.groups.get(name)
        if g is None or g.background:
            return clients, offered
        if g.clients_profile is not None:
            clients = clients_at(g.clients_profile, t)
        return clients, offered if g.profile is None else g.profile.rate_at(t)

    def saved(self) -> None:
        """The record saved while its step runs (a soak, interval by interval, knee.soaking): the page's report is
        drawn anew from it when read, its trends as they form."""
        self.hub.publish(
            record=self.record.model_copy(update={"steps": list(self.record.steps)}), version=self.hub.view.version + 1
        )

    def end(self, step: StepResult) -> None:
        self.inner.end(step)
        if self.results:
            result = self.results[-1]
            kept = {name: data for i, name in enumerate(step.groups) if (data := result.histogram(i, "latency"))}
            self.hub.keep_histograms(step.index, kept)
        done = self.record.model_copy(update={"steps": list(self.record.steps)})
        self.hub.publish(record=done, version=self.hub.view.version + 1, current=None, points=[])
