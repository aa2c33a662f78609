"""Watch a run while it goes (docs/live.md): `--serve [HOST:]PORT` serves a live page, its event stream and
`/metrics` for Prometheus; `knee report --serve RUN_DIR` serves a finished run's.

One room per concern:

- `state`: the `LiveView` (the finished steps as recorded, the current step's last snapshot) and the `Hub` that
  holds the last one: the runner's thread swaps views in, the server's threads read them;
- `progress`: `LiveProgress`, the runner's side: publishes each step's start, snapshots and end;
- `render`: the report of the steps so far (report.html's body), drawn once per step when a page reads it;
- `page`, `stream`, `metrics`: the formatters of a view: the page, its Server-Sent Events, Prometheus' text;
- `hdr`: the engine's HdrHistogram read into `/metrics`' fixed latency buckets;
- `server`: the HTTP server (standard library) and its one-sentence bind errors.

`start_live` binds (a port in use is a UserError before any load), starts the server and the renderer, and says
where the page is; `Live.end` publishes the final record, `Live.linger` keeps serving until every open page has
its final report and a scraper its last scrape (at most `[serve] linger`), and `Live.close` stops it all.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, TypeVar

import psutil
from rich.console import Console
from rich.markup import escape

from knee.engine import ShardResult
from knee.live.progress import LiveProgress
from knee.live.render import Renderer
from knee.live.server import LiveServer
from knee.live.state import Hub
from knee.machine.remote import RemoteMonitor
from knee.model import RunRecord
from knee.progress import Progress
from knee.report.html import body_of
from knee.scenario import Scenario
from knee.scenario.address import loopback
from knee.scenario.secrets import Secrets
from knee.store import RunDir


class Ran(Protocol):
    """What a run leaves (the runner's `Outcome`): its record, and whether it was interrupted."""

    @property
    def record(self) -> RunRecord: ...

    @property
    def interrupted(self) -> bool: ...


R = TypeVar("R", bound=Ran)

__all__ = ["Live", "LiveProgress", "served", "start_live"]


class Live:
    """A run being served: its hub, server and renderer."""

    def __init__(self, hub: Hub, server: LiveServer, renderer: Renderer, console: Console, linger_s: float) -> None:
        self.hub = hub
        self.server = server
        self.renderer = renderer
        self.console = console
        self.linger_s = linger_s

    def watch(
        self,
        progress: Progress,
        scenario: Scenario,
        record: RunRecord,
        results: list[ShardResult],
        remote: RemoteMonitor | None = None,
    ) -> Progress:
        """`progress`, publishing to the page too (`results`: the runner's engine results, in step order; `remote`:
        the target machines' exporters, whose latest figures the page shows)."""
        return LiveProgress(progress, self.hub, scenario=scenario, record=record, results=results, remote=remote)

    def end(self, record: RunRecord, report: str | None = None) -> None:
        """The run has ended: `record` (its status and verdicts) is what the page and `/metrics` show from now;
        `report`, the final report's body when the run wrote it already (report.html: not drawn again)."""
        done = record.model_copy(update={"steps": list(record.steps)})
        version = self.hub.view.version + 1
        if report is not None:
            self.hub.set_report(version, self.renderer.secrets.scrub(report))
        self.hub.publish(record=done, version=version, current=None, points=[], ended=True)

    def settled(self) -> bool:
        """Every open page has had the final report, and a scraper that read during the run has read once since."""
        hub = self.hub
        return hub.viewers == 0 and (not hub.scraped or hub.scraped_after_end)

    def linger(self) -> None:
        """Keep serving after the end until `settled`, at most `linger_s` (Ctrl-C stops waiting)."""
        if self.settled() or self.linger_s <= 0:
            return
        self.console.print(
            f"serving the final page and metrics for up to {self.linger_s:g} s, until they have been read "
            "(Ctrl-C stops)",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
        with contextlib.suppress(KeyboardInterrupt):
            self.hub.wait_for(self.settled, self.linger_s)

    def serve_forever(self) -> None:
        """Serve until Ctrl-C (`knee report --serve`)."""
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass

    def close(self) -> None:
        self.server.close()
        self.renderer.close()

    def __enter__(self) -> Live:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def served(where: tuple[str, int], scenario: Scenario, run_dir: RunDir, console: Console, run: Callable[..., R]) -> R:
    """`run(live=...)` (the runner's `execute`) with the run served on `where`: bound before anything runs, the final
    record published at the end, kept up until read (unless the run was interrupted), then closed."""
    text = run_dir.scenario_text() if run_dir.kept else None
    linger = scenario.serve.linger
    # the histograms of a resumed run's steps, before this process ran any, from its files
    with start_live(
        where,
        run_dir.load(),
        run_dir.secrets,
        console,
        scenario_text=text,
        linger_s=linger,
        histograms=run_dir.histogram,
    ) as live:
        outcome = run(live=live)
        written = run_dir.report_path("report.html") if run_dir.kept else None
        live.end(outcome.record, body_of(written.read_text()) if written is not None and written.exists() else None)
        if not outcome.interrupted:
            live.linger()
        return outcome


def start_live(
    where: tuple[str, int],
    record: RunRecord,
    secrets: Secrets,
    console: Console,
    *,
    scenario_text: str | None = None,
    linger_s: float = 15.0,
    ended: bool = False,
    option: str = "--serve",
    histograms: Callable[[int, str], bytes | None] | None = None,
) -> Live:
    """Serve `record` (a run starting, or `ended`) on `where` = (host, port); say where, and who can see it.
    `histograms`: where the latency histograms of steps this process did not run come from (a run directory's
    files), set before the first request can come."""
    hub = Hub(record, ended=ended)
    hub.histogram_source = histograms
    server = LiveServer(where[0], where[1], hub, secrets, option)
    renderer = Renderer(hub, secrets, scenario_text).start()
    server.start()
    host = where[0]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{server.port}/"
    console.print(f"live page: {url} · Prometheus metrics: {url}metrics", highlight=False, soft_wrap=True, markup=False)
    warning = exposure(option, host, server.port)
    if warning:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True, highlight=False)
    return Live(hub, server, renderer, console, linger_s)


def exposure(option: str, host: str, port: int) -> str | None:
    """A sentence naming who can see the run when `host` is not this machine's loopback; None when it is."""
    what = (
        "can see the run (its targets, levels, counts and failure messages; never its secrets); the default, "
        "127.0.0.1, keeps it to this machine"
    )
    if host in ("0.0.0.0", "::", ""):
        addresses = sorted(
            a.address.split("%")[0]
            for addrs in psutil.net_if_addrs().values()
            for a in addrs
            if a.family.name in ("AF_INET", "AF_INET6") and not _is_loopback(a.address)
        )
        if host == "0.0.0.0":
            addresses = [a for a in addresses if ":" not in a]
        listed = f" ({', '.join(addresses)})" if addresses else ""
        every = f"{option} {host}:{port} listens on every address of this machine{listed}"
        return f"{every}: anyone who can reach one of them {what}"
    if _is_loopback(host):
        return None
    return f"{option} {host}:{port} listens on {host}, not on loopback: anyone who can reach {host} {what}"


def _is_loopback(host: str) -> bool:
    try:
        return loopback(host)
    except ValueError:  # a name: the address it resolved to decides, and a name is not known to be loopback
        return host == "localhost"
