"""The target's machines, through the Prometheus exporters they already run (`[monitor] prometheus`,
`--monitor-url`): each endpoint is scraped about once a second during each step, on a thread of its own with a short
timeout, and the series that say why a service stopped scaling are kept, summarised per step into `RemoteStats`:

- node_exporter: CPU time per mode (busy = not idle nor iowait), load, memory, listen queue overflows and drops,
  established and TIME_WAIT sockets (and TCP states when its tcpstat collector is on), context switches;
- postgres_exporter: the connections (`pg_stat_activity_count`, else `pg_stat_database_numbackends`) and the
  `max_connections` and `superuser_reserved_connections` settings;
- every metric the user names (`[monitor] metrics`), summed over its series: a counter's rate, a gauge's value.

An endpoint that does not answer, answers with an error or with something that is not Prometheus text is counted
and its first reason kept (`failed`, `error`), never fatal; `probe()` says so in one sentence before the run.
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from knee import fmt
from knee.machine.promtext import PromTextError, Sample, parse
from knee.model import RemoteMetric, RemoteStats

EVERY_S = 1.0
TIMEOUT_S = 0.8
MAX_BYTES = 16 << 20  # an exporter's page larger than this is not read past it
IDLE_MODES = ("idle", "iowait")

_NODE = {
    "node_cpu_seconds_total",
    "node_load1",
    "node_memory_MemTotal_bytes",
    "node_memory_MemAvailable_bytes",
    "node_netstat_TcpExt_ListenOverflows",
    "node_netstat_TcpExt_ListenDrops",
    "node_netstat_Tcp_CurrEstab",
    "node_sockstat_TCP_tw",
    "node_tcp_connection_states",
    "node_context_switches_total",
}
_PG = {
    "pg_stat_activity_count",
    "pg_stat_database_numbackends",
    "pg_settings_max_connections",
    "pg_settings_superuser_reserved_connections",
}
_COUNTERS = {
    "listen_overflows": "node_netstat_TcpExt_ListenOverflows",
    "listen_drops": "node_netstat_TcpExt_ListenDrops",
    "context_switches": "node_context_switches_total",
}


class ScrapeError(Exception):
    """Why a scrape gave nothing: one clause ("cannot connect (Connection refused)")."""


def shown(url: str) -> str:
    """`url` without a user and password."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def host_of(url: str) -> str:
    return urlsplit(url).netloc.rsplit("@", 1)[-1]


def fetch(url: str, timeout_s: float = TIMEOUT_S) -> str:
    """The text at `url`, asked for as Prometheus text; ScrapeError when it cannot be had."""
    import urllib.error  # here: urllib.request (http.client, email, ssl) is a run's fixed cost when nothing is scraped
    import urllib.request

    request = urllib.request.Request(
        url,
        headers={"Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1", "Accept-Encoding": "gzip", "User-Agent": "knee"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as r:
            body = r.read(MAX_BYTES)
            kind = r.headers.get("Content-Type", "")
            if r.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
    except urllib.error.HTTPError as exc:
        raise ScrapeError(f"answered HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise ScrapeError(f"did not answer within {timeout_s:g} s") from None
        raise ScrapeError(f"cannot connect ({getattr(reason, 'strerror', None) or reason})") from None
    except TimeoutError:
        raise ScrapeError(f"did not answer within {timeout_s:g} s") from None
    except (OSError, EOFError, ValueError) as exc:
        raise ScrapeError(f"the answer could not be read ({exc})") from None
    if "html" in kind.lower():
        raise ScrapeError(f"answered with a web page ({kind.split(';')[0]}), not Prometheus text")
    return body.decode("utf-8", "replace")


def samples(url: str, keep: set[str] | None, timeout_s: float = TIMEOUT_S) -> tuple[list[Sample], dict[str, str]]:
    """The kept samples at `url` and the metrics' types; ScrapeError when it is not Prometheus text."""
    text = fetch(url, timeout_s)
    if not any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines()):
        raise ScrapeError("answered with no metrics")
    try:
        found, types = parse(text, None if keep is None else keep.__contains__)
    except PromTextError as exc:
        raise ScrapeError(f"did not answer with Prometheus text ({exc})") from None
    return found, types


@dataclass
class Reading:
    """What one scrape said, summed where a figure is per CPU, per state or per database."""

    t: float
    cpu: dict[str, float] = field(default_factory=dict)  # mode -> CPU seconds, every CPU together
    cpus: int = 0
    values: dict[str, float] = field(default_factory=dict)  # metric name -> its samples summed
    tcp_states: dict[str, float] = field(default_factory=dict)
    pg_states: dict[str, float] = field(default_factory=dict)  # postgres_exporter's connections by state
    named: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, found: list[Sample], t: float, names: set[str]) -> Reading:
        r = cls(t)
        cpus: set[str] = set()
        for s in found:
            if s.name == "node_cpu_seconds_total":
                mode = s.labels.get("mode", "")
                r.cpu[mode] = r.cpu.get(mode, 0.0) + s.value
                cpus.add(s.labels.get("cpu", ""))
            elif s.name == "node_tcp_connection_states":
                state = s.labels.get("state", "")
                r.tcp_states[state] = r.tcp_states.get(state, 0.0) + s.value
            elif s.name == "pg_stat_activity_count":
                state = s.labels.get("state", "")
                r.pg_states[state] = r.pg_states.get(state, 0.0) + s.value
            if s.name in names:
                r.named[s.name] = r.named.get(s.name, 0.0) + s.value
            r.values[s.name] = r.values.get(s.name, 0.0) + s.value
        r.cpus = len(cpus)
        return r

    def busy(self, before: Reading) -> float | None:
        """The share of CPU time busy since `before`."""
        total = sum(self.cpu.values()) - sum(before.cpu.values())
        if total <= 0:
            return None
        idle = sum(self.cpu.get(m, 0.0) - before.cpu.get(m, 0.0) for m in IDLE_MODES)
        return max(0.0, min(1.0, (total - idle) / total))

    def pg_connections(self) -> float | None:
        v = self.values
        return v.get("pg_stat_activity_count", v.get("pg_stat_database_numbackends"))

    def pg_busy(self) -> float | None:
        """The database's connections at work (not `idle`: a pool's connections kept open between queries are at
        rest), where postgres_exporter says their states; else all of them."""
        if "" in self.pg_states or not self.pg_states:
            return self.pg_connections()
        return sum(n for state, n in self.pg_states.items() if state != "idle")


class Endpoint:
    """One endpoint over one step: its readings as they come, summarised by `stats()`."""

    def __init__(self, url: str, names: set[str]) -> None:
        self.url = url
        self.names = names
        self.keep = _NODE | _PG | names
        self._lock = threading.Lock()
        self.first: Reading | None = None
        self.last: Reading | None = None
        self.previous: Reading | None = None
        self.failed = 0
        self.error = ""
        self.ok = True  # the last scrape answered
        self.samples = 0
        self._peaks: dict[str, float] = {}
        self._gauge_sums: dict[str, float] = {}
        self._named_kinds: dict[str, str] = {}
        self._states: dict[str, float] = {}

    def scrape(self, timeout_s: float = TIMEOUT_S) -> None:
        t = time.monotonic()
        try:
            found, types = samples(self.url, self.keep, timeout_s)
        except ScrapeError as exc:
            with self._lock:
                self.failed += 1
                self.error = self.error or str(exc)
                self.ok = False
            return
        reading = Reading.of(found, t, self.names)
        with self._lock:
            self.ok = True
            self._add(reading, types)

    def _peak(self, key: str, value: float | None) -> None:
        if value is not None:
            self._peaks[key] = max(self._peaks.get(key, value), value)

    def _add(self, r: Reading, types: dict[str, str]) -> None:
        self.samples += 1
        self.previous, self.last = self.last, r
        if self.first is None:
            self.first = r
        v = r.values
        self._peak("load1", v.get("node_load1"))
        if "node_memory_MemTotal_bytes" in v and "node_memory_MemAvailable_bytes" in v:
            self._peak("mem_used", v["node_memory_MemTotal_bytes"] - v["node_memory_MemAvailable_bytes"])
        self._peak("estab", v.get("node_netstat_Tcp_CurrEstab"))
        self._peak("tw", v.get("node_sockstat_TCP_tw"))
        self._peak("pg", r.pg_connections())
        for state, n in r.tcp_states.items():
            self._states[state] = max(self._states.get(state, 0.0), n)
        before = self.previous
        if before is not None:
            self._peak("busy", r.busy(before))
        for name, value in r.named.items():
            kind = "counter" if types.get(name) == "counter" or name.endswith("_total") else "gauge"
            self._named_kinds[name] = kind
            if kind == "gauge":
                self._gauge_sums[name] = self._gauge_sums.get(name, 0.0) + value
                self._peak(f"named:{name}", value)
            elif before is not None and name in before.named and r.t > before.t:
                self._peak(f"named:{name}", (value - before.named[name]) / (r.t - before.t))

    def stats(self) -> RemoteStats:
        with self._lock:
            return self._stats()

    def _stats(self) -> RemoteStats:
        first, last, p = self.first, self.last, self._peaks
        out = RemoteStats(url=shown(self.url), host=host_of(self.url), samples=self.samples, failed=self.failed)
        out.error = self.error
        if first is None or last is None:
            return out
        out.cpus = last.cpus
        if last.cpu:
            busy = last.busy(first)
            out.cpu_busy = round(busy, 4) if busy is not None else None
            out.cpu_busy_peak = round(p["busy"], 4) if "busy" in p else out.cpu_busy
            total = sum(last.cpu.values()) - sum(first.cpu.values())
            if total > 0:
                out.cpu_modes = {m: round((last.cpu[m] - first.cpu.get(m, 0.0)) / total, 4) for m in sorted(last.cpu)}
        v = last.values
        out.load1_peak = p.get("load1")
        if "mem_used" in p:
            out.mem_used_mb_peak = round(p["mem_used"] / 1e6, 1)
            out.mem_total_mb = round(v["node_memory_MemTotal_bytes"] / 1e6, 1)
        deltas = {k: int(v[n] - first.values[n]) for k, n in _COUNTERS.items() if n in v and n in first.values}
        out.listen_overflows = deltas.get("listen_overflows")
        out.listen_drops = deltas.get("listen_drops")
        if "context_switches" in deltas and last.t > first.t:
            out.context_switches_per_s = round(deltas["context_switches"] / (last.t - first.t), 1)
        out.tcp_established_peak = _int(p.get("estab"))
        out.time_wait_peak = _int(p.get("tw"))
        out.tcp_states_peak = {s: int(n) for s, n in sorted(self._states.items())}
        out.pg_connections_peak = _int(p.get("pg"))
        out.pg_max_connections = _int(v.get("pg_settings_max_connections"))
        out.pg_reserved_connections = _int(v.get("pg_settings_superuser_reserved_connections"))
        for name in sorted(self._named_kinds):
            out.metrics[name] = self._named(name, first, last, self.samples)
        return out

    def _named(self, name: str, first: Reading, last: Reading, n: int) -> RemoteMetric:
        kind = self._named_kinds[name]
        peak = self._peaks.get(f"named:{name}", 0.0)
        if kind == "gauge":
            return RemoteMetric(kind=kind, mean=round(self._gauge_sums[name] / max(1, n), 4), peak=round(peak, 4))
        span = last.t - first.t
        rate = (last.named.get(name, 0.0) - first.named.get(name, 0.0)) / span if span > 0 else 0.0
        return RemoteMetric(kind=kind, mean=round(rate, 4), peak=round(peak, 4))

    def now(self) -> str:
        """The endpoint's latest figures in a few words, for the live page: "db:9100: CPU 54 % busy, load 1.20"."""
        with self._lock:
            host = host_of(self.url)
            if not self.ok:
                return f"{host}: {self.error or 'no answer'}"
            last, before = self.last, self.previous
            if last is None:
                return f"{host}: waiting for its first scrape"
            parts = []
            busy = last.busy(before) if before is not None else None
            if busy is not None:
                parts.append(f"CPU {fmt.pct(busy)} busy of {last.cpus}")
            v = last.values
            if "node_load1" in v:
                parts.append(f"load {v['node_load1']:.2f}")
            if "node_memory_MemTotal_bytes" in v and "node_memory_MemAvailable_bytes" in v:
                used = v["node_memory_MemTotal_bytes"] - v["node_memory_MemAvailable_bytes"]
                parts.append(f"memory {fmt.size(used)} of {fmt.size(v['node_memory_MemTotal_bytes'])}")
            pg = last.pg_connections()
            if pg is not None:
                limit = v.get("pg_settings_max_connections")
                parts.append(f"{pg:.0f} connections" + (f" of {limit:.0f}" if limit else ""))
            parts += [f"{name} {value:g}" for name, value in sorted(last.named.items())]
            return f"{host}: " + (", ".join(parts) or "answering")


def _int(x: float | None) -> int | None:
    return None if x is None else round(x)


class _Scraping:
    """One step's scraping of one endpoint: a daemon thread that scrapes now, then every `every_s`, and once more
    when stopped (unless its last scrape failed: a dead endpoint does not hold up the end of a step)."""

    def __init__(self, endpoint: Endpoint, every_s: float, timeout_s: float) -> None:
        self.endpoint = endpoint
        self._every, self._timeout = every_s, timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="knee-remote", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            self.endpoint.scrape(self._timeout)
            if self._stop.wait(self._every):
                break
        if self.endpoint.ok:
            self.endpoint.scrape(self._timeout)

    def stop(self) -> RemoteStats:
        self._stop.set()
        self._thread.join(2 * self._timeout + 0.5)
        return self.endpoint.stats()


class RemoteMonitor:
    """The endpoints of `[monitor] prometheus`, scraped between each `start()` and `stop()`; `metrics`: the metric
    names the user wants kept."""

    def __init__(
        self, urls: list[str], metrics: list[str], every_s: float = EVERY_S, timeout_s: float = TIMEOUT_S
    ) -> None:
        self.urls = urls
        self.names = set(metrics)
        self.every_s, self.timeout_s = every_s, timeout_s
        self._running: list[_Scraping] = []
        self._latest: list[Endpoint] = []

    def probe(self) -> list[str]:
        """One sentence for each endpoint that cannot be scraped now (the run goes on, and scrapes it each step)."""
        out = []
        for url in self.urls:
            try:
                samples(url, None, max(self.timeout_s, 2.0))  # every line read: is it Prometheus text at all?
            except ScrapeError as exc:
                out.append(f"monitor: {shown(url)} {exc}; the run goes on, and its steps note each failed scrape")
        return out

    def start(self) -> None:
        self._latest = [Endpoint(url, self.names) for url in self.urls]
        self._running = [_Scraping(e, self.every_s, self.timeout_s) for e in self._latest]

    def stop(self) -> list[RemoteStats]:
        running, self._running = self._running, []
        return [s.stop() for s in running]

    def now(self) -> tuple[dict[str, object], ...]:
        """Each endpoint's latest figures, for the live page."""
        return tuple({"host": host_of(e.url), "line": e.now()} for e in self._latest)
