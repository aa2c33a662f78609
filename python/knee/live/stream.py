"""The live page's event stream (Server-Sent Events): what each event holds.

- `state`: the view's numbers (`state_json`, made once per view for every open page) and the current step's
  points the page has not had yet (each stream remembers what it sent, so a reopened page gets the whole step);
- `report`: the report's HTML body when a new one is rendered (a finished step, the end);
- `end`: the run has ended and the page has its final report; the page stops listening.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from knee.live.state import LiveView

_OUTCOMES = ("succeeded", "failed", "hung", "abandoned")


def _totals(view: LiveView) -> list[dict[str, Any]]:
    """Each group's outcomes over the run: its finished steps' and the current step's so far."""
    out: dict[str, dict[str, Any]] = {}
    now = view.current.index if view.current is not None else None
    # a soak's step, saved as it runs, is also the current one: counted once
    counted: list[tuple[str, Any]] = [(n, g) for s in view.steps if s.index != now for n, g in s.groups.items()]
    if view.current is not None:
        counted += [(g.name, g) for g in view.current.groups]
    for name, g in counted:
        t = out.setdefault(name, {"name": name, **dict.fromkeys(_OUTCOMES, 0)})
        for k in _OUTCOMES:
            t[k] += getattr(g, k)
    return list(out.values())


def state(view: LiveView) -> dict[str, Any]:
    """The view as the page reads it."""
    r = view.record
    now = view.current
    step = None
    if now is not None:
        step = {
            "index": now.index,
            "number": now.number,
            "total": now.total,
            "level": now.level,
            "label": now.label,
            "phase": now.phase,
            "direction": now.direction,
            "reason": now.reason,
            "elapsed_s": round(now.elapsed_s, 3),
            "planned_s": now.planned_s,
            "workers": list(now.workers) if now.workers is not None else None,
            "groups": [
                {
                    "name": g.name,
                    "clients": g.clients,
                    "succeeded": g.succeeded,
                    "failed": g.failed,
                    "hung": g.hung,
                    "abandoned": g.abandoned,
                    "in_flight": g.in_flight,
                    "rate_hz": round(g.rate_hz, 3),
                    "completed_hz": round(g.completed_hz, 3),
                    "offered_hz": g.offered_hz,
                    "late": g.late,
                    "lagged": g.lagged,
                    "p50_ms": g.p50_ms,
                    "p99_ms": g.p99_ms,
                    "failed_by_class": [list(kv) for kv in g.failed_by_class],
                }
                for g in now.groups
            ],
            "shards": [r.model_dump() for r in now.shards],
        }
    return {
        "seq": view.seq,
        "run_id": r.run_id,
        "status": r.status if view.ended else "running",
        "ended": view.ended,
        "unit": r.level_unit,
        "measured": r.measured_group,
        "version": view.version,
        "steps_done": len(view.steps),
        "step": step,
        "totals": _totals(view),
        "cpu": {"knee_s": round(view.usage.cpu_s, 3), "children_s": round(view.usage.children_cpu_s, 3)},
        "remote": list(view.remote),
        "unix": round(view.unix, 3),
    }


class States:
    """`state` as JSON text, made once per view whatever the number of pages reading it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[int, str] = (0, "")
        self._report: tuple[int, str] = (0, "")

    def json(self, view: LiveView) -> str:
        with self._lock:
            if self._last[0] != view.seq:
                self._last = (view.seq, json.dumps(state(view), separators=(",", ":")))
            return self._last[1]

    def report_json(self, report: tuple[int, str]) -> str:
        """A rendered report (its version, its HTML) as the `report` event's JSON, made once per version."""
        with self._lock:
            if self._report[0] != report[0]:
                self._report = (report[0], json.dumps({"version": report[0], "html": report[1]}))
            return self._report[1]


@dataclass
class Sent:
    """What one stream has sent: the last view, the report's version, and the current step's points."""

    seq: int = 0
    report: int = 0
    step: int = -1
    points: int = 0

    def points_json(self, view: LiveView) -> str:
        """The current step's points this stream has not sent: `{"step": index, "from": n, "data": [...]}`."""
        if view.current is None:
            return "null"
        if view.current.index != self.step:
            self.step, self.points = view.current.index, 0
        new = list(view.points[self.points :])
        start, self.points = self.points, self.points + len(new)
        data = json.dumps([[t, [list(c) for c in counts]] for t, counts in new], separators=(",", ":"))
        return f'{{"step":{self.step},"from":{start},"data":{data}}}'


def frame(event: str, data: str) -> bytes:
    """One Server-Sent Event (`data` is one line of JSON)."""
    return f"event: {event}\ndata: {data}\n\n".encode()
