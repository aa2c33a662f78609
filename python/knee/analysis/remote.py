"""Why it broke, seen from the target's own machines: findings from the Prometheus endpoints a run scraped
(`steps[].remote`, knee.machine.remote), one sentence each with its evidence and its fix, lowest level first:

- remote_cpu: a host's CPUs were busy (≥ 90 % of their time, not idle nor iowait);
- remote_memory: a host's memory in use reached 90 % of it;
- remote_listen: a host's kernel dropped connections because a listen queue was full;
- remote_connections: a database's connections reached its max_connections (less the superusers' reserve);
- remote_down: an endpoint stopped answering (or never did): its figures from then on are missing.

A host is named as the scenario knows it: "the target host" when the endpoint's host is the measured group's
(or both are this machine), else by the endpoint's host:port.
"""

from __future__ import annotations

from collections.abc import Sequence

from knee import fmt
from knee.analysis.levels import sweep_steps
from knee.model import Finding, RemoteStats, RunRecord, StepResult, Verdict
from knee.scenario.address import named_loopback

CPU_BUSY = 0.9
MEMORY_SHARE = 0.9


def _host(hostport: str) -> str:
    host = hostport.rsplit(":", 1)[0] if not hostport.endswith("]") else hostport
    return host.strip("[]")


def who(record: RunRecord, r: RemoteStats) -> str:
    """'the target host (db:9100)' when the endpoint is on the measured group's host, else 'db:9100'."""
    target = (record.targets or {}).get(record.measured_group)
    host = _host(r.host)
    if target is not None and (host == target.host or (target.local and named_loopback(host))):
        return f"the target host ({r.host})"
    return r.host


def _first(steps: Sequence[StepResult], hit: object) -> tuple[StepResult, RemoteStats] | None:
    for s in steps:
        for r in s.remote:
            if hit(r):  # type: ignore[operator]
                return s, r
    return None


def _cpu(steps: Sequence[StepResult], record: RunRecord) -> Finding | None:
    found = _first(steps, lambda r: r.cpu_busy is not None and r.cpu_busy >= CPU_BUSY)
    if found is None:
        return None
    s, r = found
    assert r.cpu_busy is not None
    busy_modes = [(m, x) for m, x in r.cpu_modes.items() if m not in ("idle", "iowait") and x >= 0.05]
    modes = sorted(busy_modes, key=lambda m: -m[1])
    detail = ", ".join(f"{m} {fmt.pct(x)}" for m, x in modes)
    cpus = f", {r.cpus} of them," if r.cpus else ""
    return Finding(
        kind="remote_cpu",
        level=s.level,
        what=f"from {fmt.load(s.level, record.level_unit)} the CPUs of {who(record, r)}{cpus} were "
        f"{fmt.pct(r.cpu_busy)} busy" + (f" ({detail})" if detail else ""),
        fix="that host ran out of CPU: find what used it (the service, or something beside it), make each operation "
        "cost less, or give the host more cores",
    )


def _memory(steps: Sequence[StepResult], record: RunRecord) -> Finding | None:
    def full(r: RemoteStats) -> bool:
        return bool(r.mem_total_mb and r.mem_used_mb_peak and r.mem_used_mb_peak >= MEMORY_SHARE * r.mem_total_mb)

    found = _first(steps, full)
    if found is None:
        return None
    s, r = found
    assert r.mem_used_mb_peak is not None and r.mem_total_mb
    return Finding(
        kind="remote_memory",
        level=s.level,
        what=f"at {fmt.load(s.level, record.level_unit)} the memory in use on {who(record, r)} reached "
        f"{fmt.pct(r.mem_used_mb_peak / r.mem_total_mb)} ({fmt.size(r.mem_used_mb_peak * 1e6)} of "
        f"{fmt.size(r.mem_total_mb * 1e6)})",
        fix="that host ran short of memory: look for what grows with the clients (a process per connection, caches), "
        "or give it more memory",
    )


def _listen(steps: Sequence[StepResult], record: RunRecord) -> Finding | None:
    found = _first(steps, lambda r: bool(r.listen_overflows or r.listen_drops))
    if found is None:
        return None
    s, r = found
    dropped = max(r.listen_overflows or 0, r.listen_drops or 0)
    return Finding(
        kind="remote_listen",
        level=s.level,
        what=f"from {fmt.load(s.level, record.level_unit)} the kernel of {who(record, r)} dropped {dropped:,} "
        "connections because a listen queue was full (ListenOverflows, ListenDrops)",
        fix="raise the server's accept backlog and net.core.somaxconn on that host, or accept faster",
    )


def _connections(steps: Sequence[StepResult], record: RunRecord) -> Finding | None:
    def full(r: RemoteStats) -> bool:
        limit = (r.pg_max_connections or 0) - (r.pg_reserved_connections or 0)
        return r.pg_connections_peak is not None and limit > 0 and r.pg_connections_peak >= limit

    found = _first(steps, full)
    if found is None:
        return None
    s, r = found
    reserved = f", {r.pg_reserved_connections} of them kept for superusers" if r.pg_reserved_connections else ""
    return Finding(
        kind="remote_connections",
        level=s.level,
        what=f"the database's connections ({who(record, r)}) reached its max_connections ({r.pg_max_connections}"
        f"{reserved}) at {fmt.load(s.level, record.level_unit)}",
        fix="raise max_connections, or put a connection pool (PgBouncer) in front of the database",
    )


def _down(steps: Sequence[StepResult], record: RunRecord) -> list[Finding]:
    out = []
    seen: set[str] = set()
    answered: set[str] = set()
    for s in sorted(steps, key=lambda s: s.index):
        for r in s.remote:
            if r.samples:
                answered.add(r.url)
            if r.failed and r.url not in seen:
                seen.add(r.url)
                at = fmt.load(s.level, record.level_unit)
                how = f"{r.failed} of {r.failed + r.samples} scrapes failed: {r.error}"
                what = (
                    f"{r.url} stopped answering during the step at {at} ({how}): that host's figures are missing "
                    "from there on"
                    if r.url in answered or r.samples
                    else f"{r.url} did not answer from the step at {at} on ({how}): that host's figures are missing"
                )
                out.append(
                    Finding(
                        kind="remote_down",
                        level=s.level,
                        what=what,
                        fix="check the exporter and that this machine can reach it (a firewall, a wrong port or path)",
                    )
                )
    return out


def remote_findings(record: RunRecord, v: Verdict) -> list[Finding]:
    """The findings from the target's machines for the measured group `v.group`."""
    steps = [s for s in sweep_steps(record.steps, v.group) if s.direction == "up" and s.remote]
    steps.sort(key=lambda s: (s.level, s.index))
    if not steps:
        return []
    found = [f(steps, record) for f in (_cpu, _memory, _listen, _connections)]
    return [f for f in found if f is not None] + _down(steps, record)
