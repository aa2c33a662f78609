"""Little's law as a sanity check of a closed-loop measurement: N ≈ X·(R + Z).

X counts every completed operation (succeeded and failed) per second, R is their mean
latency (the successes' and the failures' pooled: a report's latency is the successes' alone) and
Z the think time, plus the think time on failure for the failed share. When the N clients were really busy with the
service, X·(R+Z) comes out close to N. A large gap means clients were neither in
the service nor thinking; where they were is said by the level's evidence (side.py): at the service's
door (hung or slow connects), held by the load side (knee's CPU, ports, connects never sent), or hung
waiting for the service. Open-loop steps (an arrival rate) are skipped: their N is not fixed.
"""

from __future__ import annotations

from collections.abc import Sequence

from knee.analysis.levels import LevelRow
from knee.analysis.side import Side, unreached
from knee.model import LittleCheck

GAP = 0.20


def check(rows: Sequence[LevelRow], think_s: float = 0.0, think_on_failure_s: float = 0.0) -> list[LittleCheck]:
    out = []
    for r in rows:
        n = r.clients or r.level
        if r.open_loop or n <= 0 or r.elapsed_s <= 0 or r.latency_count + r.failed_latency_count == 0:
            continue
        expected = r.completion_rate * (r.mean_completed_latency_ms / 1000.0 + think_s)
        expected += (r.rate_failed / r.rate_s if r.rate_s > 0 else 0.0) * think_on_failure_s
        out.append(LittleCheck(level=r.level, expected_n=expected, gap=abs(n - expected) / n))
    return out


def warning(
    c: LittleCheck, clients: int, unit: str = "clients", side: Side | None = None, beside: str | None = None
) -> str:
    """The gap in words; `side`: the level's evidence, which says where the missing clients were; `beside`: the
    stress group a background group's level is (its own clients are fixed)."""
    load = f"{c.level} clients" if unit == "clients" else f"{c.level}/s offered"
    if beside is not None:
        at = f"{clients} clients beside {beside} at {load}"
    else:
        at = load if unit == "clients" else f"{load} ({clients} clients)"
    head = f"Little's law does not hold at {at}: throughput × (latency + think time) = {c.expected_n:.1f}"
    if c.expected_n < clients:
        return (
            f"{head}, so only that many of the {clients} clients were busy on average ({c.gap * 100:.0f} % gap): "
            f"{unreached(side)}; the service saw less load than the level says"
        )
    return (
        f"{head}, more than the {clients} clients ({c.gap * 100:.0f} % gap): latencies or counts include time "
        "outside the measured window (check warm-up, time-outs and the think time given to the analysis)"
    )
