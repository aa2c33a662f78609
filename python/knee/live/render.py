"""The live page's report: the record so far, analysed and drawn as report.html draws it (`knee.report.html`),
once per version (each finished step, and the end), only when a page reads it, on a thread of its own that runs
at a lower priority than the engine's (`lower_priority`), so the load generator does not pay for a drawing.
"""

from __future__ import annotations

import contextlib
import os
import threading
from functools import partial

from knee.live.state import Hub
from knee.model import RunRecord
from knee.report.escape import esc
from knee.scenario.secrets import Secrets

NICE = 10  # the server's and the renderer's threads: the engine's threads come first for the CPU
SETTLE_S = 0.5  # a step's report is drawn once no newer version has come for this long
NO_STEPS = "<p>The report appears here when the first step has ended.</p>"


def lower_priority() -> None:
    """Lower the calling thread's CPU priority (Linux: a thread's nice value is its own)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)


def report_body(record: RunRecord, scenario_text: str | None) -> str:
    """The report of `record` as the page shows it: analysed (its verdicts, unless the run's end gave them)."""
    if not record.steps:
        return NO_STEPS
    from knee.analysis import analyze_run
    from knee.report.html import report_body as body
    from knee.report.view import build

    if not record.verdicts:
        record = record.model_copy(update={"verdicts": analyze_run(record)})
    return body(record, build(record, scenario_text))


class Renderer:
    """Draws the hub's report when a reader wants a newer version than the last drawn."""

    def __init__(self, hub: Hub, secrets: Secrets, scenario_text: str | None = None, poll_s: float = 5.0) -> None:
        self.hub = hub
        self.poll_s = poll_s  # how long it waits before it looks again without being woken
        self.secrets = secrets
        self.scenario_text = scenario_text
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="knee-live-render", daemon=True)

    def start(self) -> Renderer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing = True
        self.hub.wake()
        self._thread.join(10)

    def _due(self, drawn: int) -> bool:
        hub = self.hub
        return self._closing or (hub.view.version > drawn and (hub.viewers > 0 or hub.wanted >= hub.view.version))

    def _superseded(self, version: int) -> bool:
        return self._closing or self.hub.view.version > version

    def _loop(self) -> None:
        lower_priority()
        drawn = 0
        while True:
            drawn = max(drawn, self.hub.report_version())  # the run's end may hand over report.html's body
            due = self.hub.wait_for(partial(self._due, drawn), self.poll_s)
            if self._closing:
                return
            if not due:  # nobody wants a newer report: draw nothing
                continue
            view = self.hub.view
            drawn = max(drawn, self.hub.report_version())
            if view.version <= drawn:
                continue
            if not view.ended and self.hub.wait_for(partial(self._superseded, view.version), SETTLE_S):
                continue  # a newer one came at once (the last step's, when the run ended right after): draw that
            try:
                body = report_body(view.record, self.scenario_text)
            except Exception as exc:  # a drawing that fails must not end the run; the page says why
                body = f"<p>The report could not be drawn: {esc(type(exc).__name__)}: {esc(str(exc))}</p>"
            self.hub.set_report(view.version, self.secrets.scrub(body))
            drawn = view.version
