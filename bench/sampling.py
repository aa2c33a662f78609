"""What knee's per-step counters cost (docs/diagnosis.md): CPU seconds per second of sampling.

`python bench/sampling.py` starts `knee target`, holds N keep-alive connections open to it (the
target then has N sockets, and /proc/net/tcp N × 2 lines to read), and times the samplers' own CPU
(`time.thread_time`, the sampling thread's CPU only) over many samples:

- the load machine's counters (HostSampler: /proc/net/netstat, snmp, sockstat, meminfo);
- the target's process tree (TargetMonitor: psutil per process, its fds, /proc/net/tcp).

At one sample a second, CPU per sample is CPU per second of sampling.
"""

from __future__ import annotations

import json
import socket
import statistics
import sys
import time

from knee.counters import HostSampler, TargetMonitor
from knee.target import start_target

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


def main(connections: int = 1000) -> dict[str, float]:
    t = start_target(lam=1000.0, sigma=0.0, kappa=0.0)
    socks = []
    try:
        for _ in range(connections):
            socks.append(socket.create_connection((t.host, t.http_port)))
        host = HostSampler()
        mon = TargetMonitor(pid=t.pid)
        out = {
            "connections": float(connections),
            "host_cpu_ms_per_sample": round(_cost(host._sample) * 1000, 3),
            "target_cpu_ms_per_sample": round(_cost(mon._sample) * 1000, 3),
        }
        out["cpu_share_at_1_hz"] = round((out["host_cpu_ms_per_sample"] + out["target_cpu_ms_per_sample"]) / 1000, 5)
        return out
    finally:
        for s in socks:
            s.close()
        t.stop()


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)))
