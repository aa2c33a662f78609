"""Whether the target's machines are back at rest, through their Prometheus exporters (`[monitor] prometheus`): the
wait before a step (knee.settle) reads them where it cannot see the service's sockets itself.

At rest, against what each endpoint said before the first step: node_exporter's established connections
(`node_netstat_Tcp_CurrEstab`, which counts CLOSE_WAIT too: connections whose client went and the service has not
closed) and its connections in CLOSE_WAIT when its tcpstat collector is on, and postgres_exporter's connections at
work (not idle: a service's pool keeps its connections open between queries, at rest), no more than a little above
where they were (RESTING_SLACK); and the listen queue's overflow and drop counters no longer growing. An endpoint
that does not answer is left out: the wait never hangs on an exporter.
"""

from __future__ import annotations

from dataclasses import dataclass

from knee.machine.remote import Reading, ScrapeError, samples, shown

# connections above the level before the first step that still count as at rest: a few, or a share of many
RESTING_SLACK = (2, 0.10)
_KEEP = {
    "node_netstat_Tcp_CurrEstab",
    "node_tcp_connection_states",
    "node_netstat_TcpExt_ListenOverflows",
    "node_netstat_TcpExt_ListenDrops",
    "pg_stat_activity_count",
    "pg_stat_database_numbackends",
}
_WORDS = {
    "estab": "connections established",
    "close_wait": "connections in CLOSE_WAIT",
    "pg": "database connections at work",
}


@dataclass(frozen=True)
class Figures:
    """What one endpoint said of its machine's connections."""

    estab: float | None
    close_wait: float | None
    pg: float | None
    dropped: float  # listen queue overflows + drops, since the machine started

    @classmethod
    def of(cls, r: Reading) -> Figures:
        v = r.values
        cw = r.tcp_states.get("close_wait") if r.tcp_states else None
        drops = v.get("node_netstat_TcpExt_ListenOverflows", 0.0) + v.get("node_netstat_TcpExt_ListenDrops", 0.0)
        return cls(v.get("node_netstat_Tcp_CurrEstab"), cw, r.pg_busy(), drops)


class Exporters:
    """The target machines' exporters as the wait for rest reads them: `learn()` once at rest (before the first
    step), then `left()` says what is not back yet ("" when every endpoint is at rest)."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.rest: dict[str, Figures] = {}
        self._last: dict[str, Figures] = {}

    def read(self) -> dict[str, Figures]:
        out = {}
        for url in self.urls:
            try:
                found, _ = samples(url, _KEEP)
            except ScrapeError:
                continue
            out[url] = Figures.of(Reading.of(found, 0.0, set()))
        return out

    def learn(self) -> None:
        self.rest = self.read()
        self._last = dict(self.rest)

    def left(self) -> str:
        """What the exporters say is not back at rest, in words; "" when all is (or nothing answered)."""
        now = self.read()
        parts = []
        for url, f in now.items():
            rest, last = self.rest.get(url), self._last.get(url)
            if rest is None:
                continue
            for key, words in _WORDS.items():
                value, before = getattr(f, key), getattr(rest, key)
                if value is not None and before is not None and value > before + _slack(before):
                    parts.append(f"{shown(url)}: {value:,.0f} {words} ({before:,.0f} at rest)")
            if last is not None and f.dropped > last.dropped:
                parts.append(f"{shown(url)}: its listen queue still overflowed ({f.dropped - last.dropped:,.0f} more)")
        self._last.update(now)
        return "; ".join(parts)


def _slack(at_rest: float) -> float:
    few, share = RESTING_SLACK
    return max(few, share * at_rest)
