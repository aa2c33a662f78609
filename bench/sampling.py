"""What knee's per-step counters cost (docs/diagnosis.md): CPU seconds per second of sampling.

`python bench/sampling.py [CONNECTIONS] [TIME_WAIT]` starts `knee target`, holds CONNECTIONS keep-alive
connections open to it (the target then has N sockets, the machine 2 N), leaves TIME_WAIT more closed by
this side (each a socket in TIME_WAIT for a minute), and times the samplers' own CPU (`time.thread_time`,
the sampling thread's CPU only) over many samples:

- the load machine's counters (HostSampler: /proc/net/netstat, snmp, sockstat, meminfo);
- its socket census (a netlink dump of every TCP socket: sockets by state, ephemeral ports in use), which
  the sampler runs as often as it stays within CENSUS_SHARE of a core;
- the target's process tree (TargetMonitor: psutil per process, its fds, /proc/net/tcp).

At one sample a second, CPU per sample is CPU per second of sampling.
"""

from __future__ import annotations

import json
import socket
import statistics
import sys
import time

from knee.demo_target import start_target
from knee.machine.host import ephemeral_port_range
from knee.machine.kernel import CENSUS_SHARE, SAMPLE_S, HostSampler
from knee.machine.monitor import TargetMonitor
from knee.machine.sockets import tcp_census

SAMPLES = 200


def _cost(sample: object, n: int = SAMPLES) -> float:
    """Median CPU seconds of one call of `sample`, in batches of 10."""
    per = []
    for _ in range(n // 10):
        t0 = time.thread_time()
        for _ in range(10):
            sample()  # type: ignore[operator]
        per.append((time.thread_time() - t0) / 10)
    return statistics.median(per)


def main(connections: int = 1000, time_wait: int = 0) -> dict[str, float]:
    t = start_target(lam=1000.0, sigma=0.0, kappa=0.0)
    socks = []
    try:
        for _ in range(time_wait):
            socket.create_connection((t.host, t.http_port)).close()
        for _ in range(connections):
            socks.append(socket.create_connection((t.host, t.http_port)))
        host = HostSampler()
        host._census_due = float("inf")  # the census is timed on its own: it runs as often as its budget allows
        mon = TargetMonitor(pid=t.pid)
        ports = ephemeral_port_range()
        census = _cost(lambda: tcp_census(ports), 40)
        out = {
            "connections": float(connections),
            "time_wait": float(time_wait),
            "host_cpu_ms_per_sample": round(_cost(host._sample) * 1000, 3),
            "census_cpu_ms_per_call": round(census * 1000, 3),
            "census_every_s": round(max(SAMPLE_S, census / CENSUS_SHARE), 2),
            "target_cpu_ms_per_sample": round(_cost(mon._sample) * 1000, 3),
        }
        census_ms = min(census * 1000, CENSUS_SHARE * 1000)
        per_s = out["host_cpu_ms_per_sample"] + census_ms + out["target_cpu_ms_per_sample"]
        out["cpu_share_at_1_hz"] = round(per_s / 1000, 5)
        return out
    finally:
        for s in socks:
            s.close()
        t.stop()


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    print(json.dumps(main(*args)))
