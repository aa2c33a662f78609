"""Which side held the clients, on hand-built steps (analysis/side.py): each rule that names a limit — the
curve's shape and the Little's-law warnings — names the side its evidence shows, and no other. The same
cases provoked for real are in tests/integration/test_right_side.py."""

from __future__ import annotations

import pytest
from test_analysis_helpers import shape_named, step

from knee.analysis import analyze, analyze_run
from knee.analysis.side import sides
from knee.model import GeneratorStats, HostCounters, LatencyStats, Reason, RunRecord, StepResult, TargetHost, Verdict

from sample_records import scenario

LOCAL = TargetHost(host="127.0.0.1", port=8080, local=True)
ELSEWHERE = TargetHost(host="192.0.2.10", port=8080, local=False)
IDLE = GeneratorStats(cpu_cores=0.07, cores_available=2, machine_cpu_cores=0.2, cores_busy=0.2)


def _texts(v: Verdict) -> list[str]:
    return [*v.sentences, *v.warnings, *(f.what for f in v.findings), *(f.fix for f in v.findings)]


def _no_load_side(v: Verdict) -> None:
    for text in _texts(v):
        assert "load side" not in text and "load generator" not in text, text


def _with(
    s: StepResult, *, counters: HostCounters | None = None, generator: GeneratorStats | None = None
) -> StepResult:
    s.counters = counters if counters is not None else HostCounters(samples=2, ephemeral_ports=28232)
    s.generator = (generator or IDLE).model_copy()
    return s


def connection_limit(
    *, syn_sent: bool = True, drops: bool = True, waiting: bool = False, generator: GeneratorStats | None = None
) -> list[StepResult]:
    """`knee target --max-connections 12 --backlog 4` at λ = 200/s, levels 3 to 48, 2 s steps, as measured:
    12 connections served at 5.3 ms; the clients past 12 hung in connect (SYN_SENT), their SYNs dropped."""
    rows = [(3, 1149, 0, 0), (6, 2286, 0, 0), (12, 3141, 7, 7), (24, 4486, 12, 19), (48, 4465, 36, 67)]
    steps = []
    for i, (n, ok, hung, dropped) in enumerate(rows):
        busy = min(n, 12)
        c = HostCounters(samples=3, ephemeral_ports=28232, somaxconn=4096)
        if hung and syn_sent:
            c.tcp_states_peak = {"ESTABLISHED": 2 * busy, "SYN_SENT": hung}
        if drops:
            c.listen_drops = c.listen_overflows = dropped
        if hung and waiting:
            c.accept_queue_peak = {LOCAL.port: 2 * hung, 9999: 3}
        s = step(i, n, ok, hung=hung, elapsed=2.0, mean_ms=busy * 2.0 / ok * 1000 if n >= 24 else 5.3)
        steps.append(_with(s, counters=c, generator=generator))
    return steps


def test_clients_hung_in_connect_name_the_services_connection_limit_with_its_figures() -> None:
    v = analyze(connection_limit(), "main", target=LOCAL)
    assert v.shape is not None and v.shape.name == "connection_limit" and v.shape.connections == 12
    assert v.shape.evidence == (
        "the service stopped accepting connections past about 12: 12 connections served; the clients past 12 waited "
        "to be accepted (from 12 clients; at 48 clients 36 hung in connect: up to 36 connects unanswered (SYN_SENT), "
        "67 SYNs dropped by the full listen queue); knee was not the limit (knee and its child processes used 0.07 "
        "of 2 cores)"
    )
    assert v.sentences[-1] == v.shape.evidence
    _no_load_side(v)


def test_littles_law_gaps_say_the_clients_waited_at_the_services_door() -> None:
    v = analyze(connection_limit(), "main", target=LOCAL)
    (gap,) = [w for w in v.warnings if w.startswith("Little's law does not hold at 48 clients")]
    assert (
        "the others waited at the service's door (36 hung in connect: up to 36 connects unanswered (SYN_SENT), "
        "67 SYNs dropped by the full listen queue), and knee did not hold them (knee and its child processes used "
        "0.07 of 2 cores)" in gap
    )
    _no_load_side(v)


def test_findings_and_verdict_of_a_run_tell_one_story() -> None:
    sc = scenario((3, 6, 12, 24, 48))
    record = RunRecord(run_id="r", created_unix=1.0, scenario=sc, steps=connection_limit(), targets={"main": LOCAL})
    (v,) = analyze_run(record)
    assert v.shape is not None and v.shape.name == "connection_limit"
    assert {f.kind for f in v.findings} >= {"listen_overflow"}
    _no_load_side(v)
    # Other processes busy on the machine: said, but not as the limit, which the door explains.
    for s in record.steps:
        s.generator = GeneratorStats(cpu_cores=0.07, cores_available=2, machine_cpu_cores=1.95, cores_busy=1.95)
    (v,) = analyze_run(record)
    (busy,) = [f for f in v.findings if f.kind == "shared_machine"]
    assert busy.what.endswith("the service shared the machine with its clients"), busy.what
    _no_load_side(v)


def test_connections_waiting_in_the_accept_queue_are_the_door_too() -> None:
    # A large backlog: the clients past the limit connect (the kernel completes the handshake) and wait in the
    # accept queue; the census of the load machine, where the target runs, counts them on the target's port.
    v = analyze(connection_limit(syn_sent=False, drops=False, waiting=True), "main", target=LOCAL)
    assert v.shape is not None and v.shape.name == "connection_limit"
    assert "at 48 clients 36 hung: up to 72 connections waiting to be accepted)" in v.shape.evidence
    _no_load_side(v)


def test_a_target_elsewhere_owns_no_listen_queue_of_the_load_machine() -> None:
    # The load machine's listen drops and accept queues are not the service's when it runs elsewhere; the
    # connects unanswered (SYN_SENT) are the clients' own and still count.
    s = sides(connection_limit(waiting=True), "main", ELSEWHERE)
    assert s[48].door == ["up to 36 connects unanswered (SYN_SENT)"]
    s = sides(connection_limit(syn_sent=False, waiting=True), "main", ELSEWHERE)
    assert s[48].door == [] and s[48].held is None


def test_connects_that_timed_out_or_took_a_retransmit_are_the_door() -> None:
    s = step(0, 10, 100)
    s.groups["main"].failures = {"connect_timeout": 4}
    s.groups["main"].connect_ms = LatencyStats(count=10, mean=300.0, max=1030.0)
    (side,) = sides([_with(s)], "main").values()
    assert side.held == "service"
    assert side.door == ["4 connects timed out", "connects took up to 1.03 s"]


def test_a_busy_load_side_beside_a_full_door_is_said_too() -> None:
    busy = GeneratorStats(cpu_cores=1.0, cores_available=1, cores_busy=1.0, saturated=True)
    shape = shape_named(connection_limit(generator=busy), "connection_limit", target=LOCAL)
    assert "; the load side was busy too (knee and its child processes used 1.00 of 1 cores at 12 clients" in (
        shape.evidence
    )


# ---- the load side, only with load-side evidence ----------------------------------------------------------


def knee_bound(saturated: bool) -> list[StepResult]:
    """knee on one core: past 4 clients the rate stays at ~10 000/s and the latency knee measures grows with
    the clients (its own queue): the shape of a pool, but the pool is knee's core."""
    steps = []
    for i, n in enumerate((1, 4, 16, 64)):
        x = min(n * 3000.0, 10_000.0)
        s = step(i, n, round(x * 2), elapsed=2.0, mean_ms=n / x * 1000)
        cores = min(1.0, n / 3.3)
        steps.append(
            _with(
                s,
                generator=GeneratorStats(
                    cpu_cores=cores, cores_available=1, cores_busy=cores, saturated=saturated and cores > 0.9
                ),
            )
        )
    return steps


def test_knee_saturated_on_a_plateau_is_the_load_side_not_a_pool() -> None:
    shape_named(
        knee_bound(saturated=True),
        "load_side",
        "the limit points at the load side: from 4 to 16 clients the rate grew only 0 % (10,000 Hz → 10,000 Hz) "
        "while the mean latency grew (0.400 ms → 1.60 ms), so the load side, not the service, set the rate; "
        "knee and its child processes used 1.00 of 1 cores at 4 clients (saturated)",
    )
    # the same curve with knee's core not saturated is a pool of the service's
    shape_named(knee_bound(saturated=False), "pool")


def test_little_gap_with_a_saturated_load_side_says_so() -> None:
    steps = knee_bound(saturated=True)
    steps[3].groups["main"].latency_ms.mean = 2.0  # 64 clients, 10 000/s × 2 ms = 20 in the service
    v = analyze(steps, "main")
    (gap,) = [w for w in v.warnings if w.startswith("Little's law does not hold at 64 clients")]
    assert "the load side held them back (knee and its child processes used 1.00 of 1 cores at 64 clients" in gap


def test_ports_used_up_and_connects_never_sent_are_load_side_evidence() -> None:
    a, b = step(0, 1, 1000), step(1, 8, 4000)
    c = step(2, 32, 4100, failed=3, mean_ms=8.0 * 10 / 410.3 * 1000 / 8)
    c.groups["main"].reasons = [
        Reason(
            class_="connect_error", key="k", sample="connect to 127.0.0.1:80: Cannot assign requested address", count=3
        )
    ]
    ports = HostCounters(samples=2, ephemeral_ports=28232, ephemeral_in_use_peak=20_000)
    steps = [_with(a), _with(b), _with(c, counters=ports)]
    held = sides(steps, "main", LOCAL)[32]
    assert held.held == "load"
    assert held.load == [
        "20,000 of the 28,232 ephemeral ports were in use at 32 clients",
        "3 connects were never sent at 32 clients (“connect to 127.0.0.1:80: Cannot assign requested address”)",
    ]
    shape = shape_named(steps, "load_side", target=LOCAL)
    assert "20,000 of the 28,232 ephemeral ports were in use at 32 clients" in shape.evidence


def test_the_machines_time_wait_toward_other_destinations_is_no_load_side_evidence() -> None:
    # 14,538 sockets in TIME_WAIT machine-wide (earlier runs, other services), none seen toward the target: the
    # target's port supply is untouched (a CI run named the load side busy from sockstat's count)
    a, b = step(0, 1, 1000), step(1, 8, 4000)
    c = step(2, 32, 4100, mean_ms=8.0 * 10 / 410.3 * 1000 / 8)
    tw = HostCounters(
        samples=2, ephemeral_ports=28232, time_wait_peak=14_538, ephemeral_in_use_peak=0,
        tcp_states_peak={"TIME_WAIT": 14_538, "ESTABLISHED": 48},
    )  # fmt: skip
    steps = [_with(a), _with(b), _with(c, counters=tw)]
    assert sides(steps, "main", LOCAL)[32].load == []


# ---- neither side shows: none is named ----------------------------------------------------------------


def test_a_gap_with_no_evidence_blames_no_side() -> None:
    ok = _with(step(0, 10, 1000, mean_ms=100.0, elapsed=10.0))
    idle = _with(step(1, 50, 1000, mean_ms=100.0, elapsed=10.0))
    v = analyze([ok, idle], "main")
    (gap,) = [w for w in v.warnings if "at 50 clients" in w]
    assert "the others were neither in the service nor hung, and knee was not saturated" in gap
    _no_load_side(v)


def test_hung_operations_without_a_connect_seen_waiting_are_not_called_a_connection_limit() -> None:
    # The service answered nobody past 16 clients, and no connect was seen waiting (no counters at all):
    # they hung waiting for the service, no door and no load side named.
    steps = [_with(step(i, n, round(min(n, 16) / 0.02 * 2), elapsed=2.0, mean_ms=20.0)) for i, n in enumerate((4, 16))]
    steps.append(_with(step(2, 32, 1600, hung=16, elapsed=2.0, mean_ms=20.0)))
    steps.append(_with(step(3, 64, 1600, hung=48, elapsed=2.0, mean_ms=20.0)))
    v = analyze(steps, "main", target=LOCAL)
    assert v.shape is not None and v.shape.name == "flat"
    assert "at 32 clients 16 operations hung waiting for the service" in v.shape.evidence
    assert any("48 operations hung waiting for the service; knee was not saturated" in w for w in v.warnings)
    _no_load_side(v)


# ---- a pool behind a connection limit ----------------------------------------------------------------


def pool_behind_a_limit(door: bool = True) -> list[StepResult]:
    """8 workers of 20 ms behind a limit of 16 connections, 2 s steps: the rate grows to 400/s at 8 clients,
    the latency then doubles up to 16, and past 16 the clients wait at the door and hang (1 s timeout)."""
    steps = []
    for i, n in enumerate((1, 2, 4, 8, 16, 32, 64)):
        x = min(n, 8) / 0.020
        inside = min(n, 16)
        hung = n - inside
        c = HostCounters(samples=2, ephemeral_ports=28232)
        if hung and door:
            c.accept_queue_peak = {LOCAL.port: 2 * hung}
        s = step(i, n, round(x * 2), hung=hung, elapsed=2.0, mean_ms=inside / x * 1000)
        steps.append(_with(s, counters=c))
    return steps


def test_a_pool_behind_a_connection_limit_names_both() -> None:
    v = analyze(pool_behind_a_limit(), "main", target=LOCAL)
    assert v.shape is not None and v.shape.name == "pool"
    assert v.shape.pool_size == pytest.approx(8.0, rel=0.01) and v.shape.connections == 16
    assert v.shape.evidence.startswith(
        "a fixed pool with a queue: from 8 to 16 clients the rate stayed within 10 % of its peak (400 Hz) while the "
        "mean latency grew with the clients (20.0 ms → 40.0 ms for 2× the clients); the pool holds about 8.0"
    )
    assert (
        "; then the service stopped accepting connections past about 16: 16 connections served; the clients past 16 "
        "waited to be accepted (from 32 clients; at 64 clients 48 hung: up to 96 connections waiting to be accepted)"
    ) in v.shape.evidence
    _no_load_side(v)


def test_hangs_above_a_pool_no_longer_hide_it_once_their_side_is_known() -> None:
    # Without the door's evidence the hung levels above are not the pool's, nor a connection limit's.
    v = analyze(pool_behind_a_limit(door=False), "main", target=LOCAL)
    assert v.shape is None or v.shape.name not in ("pool", "connection_limit", "load_side")


def test_a_saturated_generators_noisy_rate_is_still_the_load_side() -> None:
    # knee's core full at 16 and 64 clients: the rate it reaches moves by others' noise (+15 % here), not by
    # the service; without the evidence the same curve is still rising.
    def curve(saturated: bool) -> list[StepResult]:
        steps = []
        for i, (n, x) in enumerate(((4, 9000.0), (16, 11_500.0), (64, 13_200.0))):
            g = GeneratorStats(cpu_cores=0.98, cores_available=1, cores_busy=0.99, saturated=saturated and n >= 16)
            steps.append(_with(step(i, n, round(x * 2), elapsed=2.0, mean_ms=n / x * 1000), generator=g))
        return steps

    shape = shape_named(curve(saturated=True), "load_side")
    assert "from 16 to 64 clients the rate grew only 15 %" in shape.evidence
    shape_named(curve(saturated=False), "rising")
