"""The findings' rules, each from steps built with its counter set and each without it: the rule fires at
the right level with its numbers, and stays quiet when the condition is absent. (The conditions provoked
for real are in tests/integration/test_why.py.)"""

from __future__ import annotations

from knee.analysis import analyze_run
from knee.analysis.findings import findings
from knee.machine.cpu import saturated
from knee.model import (
    BusiestProcess,
    GeneratorStats,
    HostCounters,
    ListenSocket,
    Reason,
    RunRecord,
    StepResult,
    TargetHost,
    TargetStats,
)

from sample_records import make_group, scenario

LEVELS = (1, 10, 100)


def _record(
    counters: dict[int, HostCounters] | None = None,
    target: dict[int, TargetStats] | None = None,
    generator: dict[int, GeneratorStats] | None = None,
    url: str = "http://127.0.0.1:8080/obj",
) -> RunRecord:
    sc = scenario(LEVELS)
    sc.groups["main"].url = url  # type: ignore[union-attr]
    steps = [
        StepResult(
            index=i,
            level=n,
            started_unix=1000.0 + 10 * i,
            elapsed_s=10.0,
            groups={"main": make_group("main", n, 10.0 * n, seed=i)},
            counters=(counters or {}).get(n, HostCounters(samples=10, ephemeral_ports=28232, somaxconn=4096)),
            target=(target or {}).get(n),
            generator=(generator or {}).get(n, GeneratorStats(cores_available=2)),
        )
        for i, n in enumerate(LEVELS)
    ]
    record = RunRecord(run_id="r", created_unix=1000.0, scenario=sc, steps=steps)
    record.verdicts = analyze_run(record)
    return record


def _kinds(record: RunRecord) -> dict[str, object]:
    return {f.kind: f for f in findings(record, record.verdicts[0])}


def test_a_quiet_run_has_no_findings() -> None:
    assert _kinds(_record()) == {}


def test_syn_retransmits_are_found_at_the_first_level_with_them() -> None:
    c = {10: HostCounters(syn_retrans=7, attempt_fails=2), 100: HostCounters(syn_retrans=300)}
    f = _kinds(_record(counters=c))["syn_retrans"]
    assert f.level == 10  # type: ignore[attr-defined]
    assert "from 10 clients 7 connection attempts were sent again" in f.what  # type: ignore[attr-defined]


def test_time_wait_over_half_the_ports_is_the_client_host() -> None:
    c = {100: HostCounters(time_wait_peak=15_000, ephemeral_ports=28_232)}
    assert _kinds(_record(counters=c))["ports"].level == 100  # type: ignore[attr-defined]
    c = {100: HostCounters(time_wait_peak=14_000, ephemeral_ports=28_232)}  # under half: not yet
    assert "ports" not in _kinds(_record(counters=c))
    # where the census ran, it alone counts: the machine's TIME_WAIT goes to every destination
    census = {"TIME_WAIT": 15_000, "ESTABLISHED": 10}
    c = {100: HostCounters(time_wait_peak=15_000, ephemeral_ports=28_232, tcp_states_peak=census)}
    assert "ports" not in _kinds(_record(counters=c))
    c = {
        100: HostCounters(
            time_wait_peak=15_000, ephemeral_ports=28_232, ephemeral_in_use_peak=15_000, tcp_states_peak=census
        )
    }
    assert _kinds(_record(counters=c))["ports"].level == 100  # type: ignore[attr-defined]


def test_a_busy_machine_is_named_only_when_the_target_shares_it() -> None:
    busy = {100: GeneratorStats(cpu_cores=0.3, children_cpu_cores=0.2, machine_cpu_cores=1.9, cores_available=2)}
    f = _kinds(_record(generator=busy))["shared_machine"]
    assert f.level == 100 and "1.90 of 2 cores" in f.what  # type: ignore[attr-defined]
    assert "shared_machine" not in _kinds(_record(generator=busy, url="http://192.0.2.10:8080/"))
    # knee pinned to 1 core of 2 (the service on the other): the machine's 1.8 busy cores are of its 2, not of 1
    pinned = {100: GeneratorStats(cpu_cores=0.8, machine_cpu_cores=1.5, cores_available=1, machine_cores=2)}
    assert "shared_machine" not in _kinds(_record(generator=pinned))
    pinned[100].machine_cpu_cores = 1.9
    assert "1.90 of 2 cores" in _kinds(_record(generator=pinned))["shared_machine"].what  # type: ignore[attr-defined]


def test_a_saturated_load_side_says_whose_cores() -> None:
    sat = {10: GeneratorStats(cpu_cores=0.4, children_cpu_cores=1.5, cores_available=2, saturated=True)}
    f = _kinds(_record(generator=sat))["load_side"]
    assert f.level == 10 and "knee used 0.40 and its client processes 1.50 of 2 cores" in f.what  # type: ignore[attr-defined]
    assert "shared the machine" in f.what  # type: ignore[attr-defined]
    assert "other processes" not in f.what  # type: ignore[attr-defined]
    # Its cores full, knee and its clients holding 1.2 of them: other processes took the rest.
    full = {100: GeneratorStats(cpu_cores=0.2, children_cpu_cores=1.0, cores_busy=1.95, cores_available=2)}
    full[100].saturated = saturated(full[100].load_cores, full[100].cores_busy, 2)
    f = _kinds(_record(generator=full))["load_side"]
    assert f.level == 100 and "of 2 cores; other processes took 0.75 of them: the load side" in f.what  # type: ignore[attr-defined]


def test_failing_clients_that_spin_are_told_instead_of_a_saturated_load_side() -> None:
    # At 10 clients the load side is saturated while the clients fail 50 times a second each (20 ms a round)
    # against 1 Hz of successes: one story, the spinning, with the rate of failures and the pause that ends it.
    sat = {10: GeneratorStats(cpu_cores=0.1, children_cpu_cores=1.85, machine_cpu_cores=1.98, cores_available=2)}
    sat[10].saturated = True
    record = _record(generator=sat)
    g = record.steps[1].groups["main"]
    g.succeeded, g.failed, g.rate_hz = 10, 5000, 1.0
    record.verdicts = analyze_run(record)
    k = _kinds(record)
    assert "load_side" not in k and "shared_machine" not in k
    f = k["spinning"]
    assert f.level == 10 and "failures at 500 Hz against successes at 1.00 Hz" in f.what  # type: ignore[attr-defined]
    assert "knee and its client processes used 1.95 of 2 cores re-running them" in f.what  # type: ignore[attr-defined]
    assert "--think-on-failure" in f.fix  # type: ignore[attr-defined]
    # Failures no faster than successes (a pause after each, or slow failures): no spinning, the load side is named.
    g.failed = 100
    record.verdicts = analyze_run(record)
    k = _kinds(record)
    assert "spinning" not in k and k["load_side"].level == 10  # type: ignore[attr-defined]


def test_the_target_monitor_rules() -> None:
    def t(**kw: object) -> TargetStats:
        base: dict[str, object] = {"pid": 42, "name": "svc", "samples": 10, "rss_mb_peak": 100.0, "threads_peak": 4}
        base.update(kw)
        return TargetStats.model_validate(base)

    mon = {
        1: t(cpu_s=1.0, cpu_cores_mean=0.1),
        10: t(cpu_s=10.0, cpu_cores_mean=1.85, fds_peak=950, fd_limit=1024, rss_mb_peak=110.0),
        100: t(alive=False, rss_mb_peak=200.0, listen=[ListenSocket(port=8080, backlog=128, queue_peak=129)]),
    }
    k = _kinds(_record(target=mon))
    assert k["target_cpu"].level == 10 and "svc used 1.85 of 2 cores" in k["target_cpu"].what  # type: ignore[attr-defined]
    assert k["target_fds"].level == 10 and "950 open files of its limit 1,024" in k["target_fds"].what  # type: ignore[attr-defined]
    assert k["target_exit"].level == 100  # type: ignore[attr-defined]
    assert "accept queue of port 8080 was full (129 waiting, backlog 128)" in k["accept_queue"].what  # type: ignore[attr-defined]
    # 100 MB at 1 client to 200 MB at 100: about 1 MB (1010 kB) per concurrent client
    assert "(1010 kB per concurrent client)" in k["target_usage"].what  # type: ignore[attr-defined]


def test_a_target_process_at_one_whole_core_is_its_own_limit() -> None:
    def t(busiest: BusiestProcess) -> TargetStats:
        return TargetStats(pid=42, name="nginx", samples=10, cpu_s=9.8, cpu_cores_mean=0.99, busiest=busiest)

    def worker(**kw: float) -> BusiestProcess:
        return BusiestProcess.model_validate({"pid": 43, "command": "nginx: worker process", "threads": 1, **kw})

    mon = {1: t(worker(cpu_cores=0.4)), 10: t(worker(cpu_cores=0.98, cpu_cores_peak=1.0, runnable_cores=0.99))}
    f = _kinds(_record(target=mon))
    assert "target_cpu" not in f  # 0.99 of 2 cores: not the machine's
    core = f["target_core"]
    assert core.level == 10  # type: ignore[attr-defined]
    what = "from 10 clients nginx's process 43 “nginx: worker process” used a whole core (0.98 cores, peak 1.00)"
    assert what in core.what and "a single-threaded limit" in core.what  # type: ignore[attr-defined]
    # On a busy machine: it ran 0.60 of a core and waited for a CPU the rest: it still wanted the whole core.
    f = _kinds(_record(target={10: t(worker(cpu_cores=0.6, runnable_cores=0.97))}))
    assert (
        "wanted a whole core (0.60 cores, peak 0.00; it ran or waited for a CPU 97 % of the time)"
        in f["target_core"].what
    )  # type: ignore[attr-defined]
    # Several threads at one core together, wanting no more: one lock serialises them.
    gil = BusiestProcess(pid=42, command="python app.py", threads=8, cpu_cores=0.97)
    f = _kinds(_record(target={10: t(gil)}))
    assert "nginx (pid 42) “python app.py” used a whole core with its 8 threads together" in f["target_core"].what  # type: ignore[attr-defined]
    # … but not when they used more than one core, nor one process at half a core.
    for calm in (BusiestProcess(pid=42, threads=8, cpu_cores=1.6), worker(cpu_cores=0.5)):
        assert "target_core" not in _kinds(_record(target={10: t(calm)}))


def test_every_group_gets_its_own_reason_and_only_the_measured_group_the_machines_counters() -> None:
    counters = {n: HostCounters(samples=10, syn_retrans=50 if n >= 10 else 0) for n in LEVELS}
    record = _record(counters=counters)
    for i, s in enumerate(record.steps):
        base = make_group("base", 5, 20.0, seed=i, failed=8 if s.level >= 100 else 0)
        if s.level >= 100:
            base.reasons = [Reason(class_="status", key="HTTP 503 Service Unavailable", sample="HTTP 503", count=8)]
        s.groups["base"] = base
    record.verdicts = analyze_run(record)
    by_group = {v.group: {f.kind: f for f in v.findings} for v in record.verdicts}
    assert set(by_group["main"]) == {"syn_retrans"}
    (refused,) = by_group["base"].values()
    assert refused.kind == "refused" and refused.level == 100
    assert "answered 8 operations with “HTTP 503”" in refused.what and "rejected work" in refused.fix


def test_where_the_target_ran_is_read_from_the_record_not_looked_up() -> None:
    busy = {100: GeneratorStats(cpu_cores=0.3, children_cpu_cores=0.2, machine_cpu_cores=1.9, cores_available=2)}
    # recorded at run time: a name this machine cannot resolve was the load machine then, an address of its
    # loopback was another machine's (a container's): the record decides, not this machine
    there = _record(generator=busy, url="http://db.invalid:8080/")
    there.targets = {"main": TargetHost(host="db.invalid", port=8080, local=True)}
    assert "shared_machine" in _kinds(there)
    elsewhere = _record(generator=busy)
    elsewhere.targets = {"main": TargetHost(host="127.0.0.1", port=8080, local=False)}
    assert "shared_machine" not in _kinds(elsewhere)


def test_a_record_from_before_targets_were_recorded_says_local_only_for_a_loopback_host() -> None:
    busy = {100: GeneratorStats(cpu_cores=0.3, children_cpu_cores=0.2, machine_cpu_cores=1.9, cores_available=2)}
    for url, local in [
        ("http://127.0.0.1:8080/", True),
        ("http://localhost:8080/", True),
        ("http://[::1]:8080/", True),
        ("http://192.0.2.10:8080/", False),
        ("http://db.invalid:8080/", False),
    ]:
        record = _record(generator=busy, url=url)
        assert record.targets is None
        assert ("shared_machine" in _kinds(record)) == local, url
