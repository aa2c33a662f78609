"""A one-line live status for a single run, drawn on stderr once a second."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text


class LiveLine:
    """`with LiveLine() as live: ... live.update(snapshot)`; draws nothing when disabled."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._live: Live | None = None
        self._last: tuple[float, int] | None = None

    def __enter__(self) -> LiveLine:
        if self.enabled:
            self._live = Live(Text("starting…"), console=Console(stderr=True), transient=True, auto_refresh=False)
            self._live.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)
            self._live = None

    def update(self, snap: dict[str, Any]) -> None:
        if self._live is None:
            return
        t = float(snap.get("elapsed_s", 0.0))
        groups = snap.get("groups", [])
        ok = sum(int(g.get("succeeded", 0)) for g in groups)
        failed = sum(int(g.get("failed", 0)) for g in groups)
        hung = sum(int(g.get("hung", 0)) for g in groups)
        in_flight = sum(int(g.get("in_flight", 0)) for g in groups)
        rate = 0.0
        if self._last is not None and t > self._last[0]:
            rate = (ok - self._last[1]) / (t - self._last[0])
        self._last = (t, ok)
        p99 = max((float(g.get("p99_us", 0)) for g in groups), default=0.0) / 1000.0
        line = Text.assemble(
            (f"{t:7.1f} s  ", "bold"),
            (f"{ok} ok", "green"),
            "  ",
            (f"{failed} failed", "red" if failed else ""),
            "  ",
            (f"{hung} hung", "magenta" if hung else ""),
            f"  {rate:,.1f}/s  in flight {in_flight}  p99 {p99:.1f} ms",
        )
        self._live.update(line, refresh=True)
