"""Why it broke, provoked for real on loopback: a listen queue that overflows, ephemeral ports used up
inside a namespace of the test's own, a CLI that says why on stderr, client processes that take the
machine's CPU, and the target's process tree sampled per level (docs/diagnosis.md)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from knee import fmt
from knee.analysis.findings import findings
from knee.demo_target import start_target
from knee.machine.kernel import events
from knee.store import RunDir

from conftest import knee_cli
from servers import free_port, popen_nginx, wait_for_port

KNEE = str(Path(sys.executable).with_name("knee"))


def _record(out: Path) -> dict[str, Any]:
    (run,) = out.iterdir()
    doc: dict[str, Any] = json.loads((run / "run.json").read_text())
    return doc


def _sweep_under(prefix: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """`knee sweep ARGS` run by `prefix` (inside a namespace, pinned to a core)."""
    return subprocess.run([*prefix, KNEE, "sweep", *args], capture_output=True, text=True, timeout=120)


def _findings(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    main = next(v for v in doc["verdicts"] if v["group"] == doc["measured_group"])
    return {f["kind"]: f for f in main["findings"]}


@contextlib.contextmanager
def _namespace(name: str) -> Iterator[list[str]]:
    """A network namespace of the test's own, its loopback up: its kernel counters and sysctls are the
    test's alone. Yields the command prefix that runs a program inside it; deleted on the way out."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    assert shutil.which("ip"), "iproute2 is not installed: run `make ci-deps` (scripts/install-system-deps.sh)"
    ns = f"{name}{os.getpid() % 100000}"
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True, timeout=10).returncode:
        pytest.skip("this machine does not let the test make network namespaces (ip netns add failed)")
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True, timeout=10)
        yield ["ip", "netns", "exec", ns]
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


class _KernelTrace:
    """ListenOverflows read every 2 ms on a thread of the test's own, with the time of each change: the
    kernel's count inside a window of time, independent of knee's sampler. `net` is the namespace's
    tables (`/proc/PID/net` of a process inside it)."""

    def __init__(self, net: Path) -> None:
        self.net = net
        self.changes: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        last = None
        while not self._stop.is_set():
            now, v = time.time(), events(self.net)["listen_overflows"]
            if v != last:
                self.changes.append((now, v))
                last = v
            time.sleep(0.002)

    def __enter__(self) -> _KernelTrace:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, t: float) -> int:
        """The counter's value at time t (its last change at or before t)."""
        return [v for ts, v in self.changes if ts <= t][-1]


def test_a_listen_queue_that_overflows_is_counted_like_the_kernel_and_named(tmp_path: Path) -> None:
    # The server accepts 2 connections and no more; its listen queue holds 1: the other clients' SYNs are
    # dropped by the kernel (ListenOverflows), and retried. Inside a namespace of its own, no other test's
    # traffic reaches the counter.
    with _namespace("kneeovf") as inside:
        t = start_target(lam=1000.0, sigma=0.0, kappa=0.0, max_connections=2, backlog=1, wrap=inside)
        try:
            with _KernelTrace(Path(f"/proc/{t.pid}/net")) as kernel:
                r = _sweep_under(
                    inside, f"{t.url}/", "--levels", "2,24", "-d", "3", "--timeout", "10s", "--no-recovery",
                    "--monitor-pid", str(t.pid), "--out", str(tmp_path),
                )  # fmt: skip
        finally:
            t.stop()
    assert r.returncode == 0, r.stderr
    doc = _record(tmp_path)
    counted = [s["counters"]["listen_overflows"] for s in doc["steps"]]
    assert counted[0] == 0, "2 clients fit in the 2 accepted connections: nothing may overflow"
    # The kernel's count over the step: connections abandoned at its end go on retransmitting (a FIN
    # every RTO, from 200 ms on) into the full queue, and those overflows belong to no step. The window
    # closes 150 ms after the step's end: before the first of them, after knee's last sample.
    step = doc["steps"][1]
    start, end = step["started_unix"], step["started_unix"] + step["elapsed_s"]
    in_step = kernel.at(end + 0.15) - kernel.at(start - 0.2)
    assert in_step > 10, f"the test did not provoke overflows (kernel count in the step {in_step})"
    assert abs(counted[1] - in_step) <= 0.05 * in_step, (counted, in_step, kernel.changes)
    print(f"listen overflows at 24 clients: knee {counted[1]}, the kernel {in_step}")
    found = _findings(doc)
    assert found["listen_overflow"]["level"] == 24
    assert f"overflowed {counted[1]:,} times" in found["listen_overflow"]["what"]
    assert f"port {t.http_port} (backlog 1)" in found["listen_overflow"]["what"]
    # The target's own accept queue, sampled from /proc/net/tcp, was full at 24 clients.
    listen = {x["port"]: x for x in doc["steps"][1]["target"]["listen"]}
    assert listen[t.http_port]["backlog"] == 1 and listen[t.http_port]["queue_peak"] >= 1
    assert found["accept_queue"]["level"] == 24
    assert "why: from 24 clients the listen queue" in r.stdout.replace("\n", " ")
    md = (next(tmp_path.iterdir()) / "report.md").read_text()
    assert "### Why" in md and "### Machine and target counters" in md


def test_connections_per_request_use_up_a_narrow_port_range_inside_a_namespace(tmp_path: Path) -> None:
    with _namespace("kneeports") as inside:
        # 50 ephemeral ports, and no reuse of a port in TIME_WAIT: a few hundred connections use them up.
        for key, value in (("net.ipv4.ip_local_port_range", "40000 40049"), ("net.ipv4.tcp_tw_reuse", "0")):
            subprocess.run([*inside, "sysctl", "-qw", f"{key}={value}"], check=True, timeout=10)
        # Its ports outside the ephemeral range, so that the clients' connections cannot take them.
        target = start_target(wrap=inside, extra_args=["--port", "39001", "--tcp-port", "39000"])
        out = tmp_path / "runs"
        try:
            r = _sweep_under(
                inside, f"tcp://{target.tcp_addr}", "--send", "GET /\\n", "--expect", ".", "--levels", "2,4",
                "-d", "2", "--no-recovery", "--out", str(out),
            )  # fmt: skip
        finally:
            target.stop()
    assert r.returncode == 0, r.stderr
    doc = _record(out)
    c = doc["steps"][0]["counters"]
    assert c["ephemeral_ports"] == 50
    assert c["time_wait_peak"] >= 40, c
    # The census counts the ports themselves: the target's are outside the range, so every port in use is a
    # client's, in TIME_WAIT or connected, and there are no more than 50.
    assert c["time_wait_peak"] <= c["ephemeral_in_use_peak"] <= 50, c
    assert c["tcp_states_peak"]["TIME_WAIT"] >= 40 and c["tcp_states_peak"]["LISTEN"] == 2, c
    found = _findings(doc)
    assert found["ports"]["level"] == 2
    held = f"{c['ephemeral_in_use_peak']} of the 50 ephemeral ports were in use ({c['time_wait_peak']} sockets in"
    assert held in found["ports"]["what"]
    # The reason the connects gave, and its fix.
    assert "Cannot assign requested address" in found["refused"]["what"]
    assert "ran out of ephemeral ports" in found["refused"]["fix"]


def test_a_cli_that_says_why_on_stderr_is_grouped_in_every_report(tmp_path: Path) -> None:
    script = "echo 'FATAL: sorry, too many clients already (pid '$$')' >&2; exit 2"
    out = tmp_path / "runs"
    js = tmp_path / "run.json"
    r = knee_cli(
        "sweep", "--levels", "1,2", "--iterations", "6", "--no-recovery", "--out", str(out), "--", "sh", "-c", script,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = _record(out)
    counts = [s["groups"]["main"]["reasons"] for s in doc["steps"]]
    assert [[x["count"] for x in rs] for rs in counts] == [[6], [12]]
    key = counts[1][0]["key"]
    assert key == "sh exited with code 2: FATAL: sorry, too many clients already (pid <n>)", key
    run = next(out.iterdir())
    assert "FATAL: sorry, too many clients already" in (run / "report.md").read_text()
    assert "FATAL: sorry, too many clients already" in (run / "report.html").read_text()
    assert "FATAL: sorry, too many clients already" in r.stdout
    found = _findings(doc)
    assert found["refused"]["level"] == 1
    assert (
        "from 1 client the service answered 6 operations with “sh exited with code 2: FATAL: sorry, too many clients"
        in found["refused"]["what"]
    )
    assert "connection limit" in found["refused"]["fix"]
    single = knee_cli("run", "-c", "2", "--iterations", "3", "--json", str(js), "--", "sh", "-c", script)
    assert single.returncode == 0, single.stderr
    (reason,) = json.loads(js.read_text())["reasons"]
    assert reason["count"] == 6 and "too many clients" in reason["sample"]


@pytest.mark.alone  # the CPU knee's client processes took, against the machine's
def test_client_processes_that_take_the_cpu_are_named_as_the_load_side(tmp_path: Path) -> None:
    if not shutil.which("taskset"):
        pytest.skip("taskset (util-linux) is not installed")
    # Pinned to one core, 3 clients each running a CPU-bound command keep it busy: the limit is the load side.
    busy = "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"
    out = tmp_path / "runs"
    r = _sweep_under(
        ["taskset", "-c", "0"], "--levels", "1,3", "-d", "2", "--no-recovery", "--out", str(out), "--", "sh", "-c", busy
    )
    assert r.returncode == 0, r.stderr
    doc = _record(out)
    gen = doc["steps"][1]["generator"]
    assert gen["cores_available"] == 1 and gen["saturated"], gen
    assert gen["children_cpu_cores"] > gen["cpu_cores"], "the shells, not knee, used the core"
    found = _findings(doc)
    assert found["load_side"]["level"] <= 3
    assert "the load side, not the service, was the limit" in found["load_side"]["what"]


@contextlib.contextmanager
def _cpu_quota(cpus: float) -> Iterator[list[str]]:
    """A cgroup of the test's own whose CPU quota lets its processes use `cpus` CPUs (a container's CPU limit):
    cgroup v1's cpu controller or v2's. Yields the command prefix that runs a program inside it; removed on the
    way out."""
    if os.geteuid() != 0:
        pytest.skip("a cgroup of the test's own needs root")
    name = f"knee-test-{os.getpid()}"
    v1, v2 = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")
    if (v1 / "cpu.cfs_quota_us").exists():
        d = v1 / name
        d.mkdir()
        (d / "cpu.cfs_period_us").write_text("100000")
        (d / "cpu.cfs_quota_us").write_text(str(round(cpus * 100_000)))
    else:  # v2: the root must hand the cpu controller down
        (v2 / "cgroup.subtree_control").write_text("+cpu")
        d = v2 / name
        d.mkdir()
        (d / "cpu.max").write_text(f"{round(cpus * 100_000)} 100000")
    try:
        yield ["sh", "-c", f'echo $$ > {d}/cgroup.procs && exec "$@"', "sh"]
    finally:
        d.rmdir()  # its processes have all exited: the sweep was waited for


@pytest.mark.alone  # the CPU knee's client processes took, against a quota
def test_a_cgroup_quota_is_the_load_sides_limit(tmp_path: Path) -> None:
    # Not pinned (both cores free), but in a cgroup allowed half a CPU: 3 clients each running a CPU-bound command
    # use all of that half. Judged against the 2 cores, 0.5 was idle machine; it is the limit, as a container's is.
    busy = "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"
    out = tmp_path / "runs"
    with _cpu_quota(0.5) as prefix:
        r = _sweep_under(
            prefix, "--levels", "1,3", "-d", "2", "--no-recovery", "--out", str(out), "--", "sh", "-c", busy
        )
    assert r.returncode == 0, r.stderr
    doc = _record(out)
    gen = doc["steps"][1]["generator"]
    assert gen["cpu_quota"] == 0.5 and gen["cores_available"] == len(os.sched_getaffinity(0)), gen
    assert gen["saturated"] and gen["cpu_cores"] + gen["children_cpu_cores"] <= 0.55, gen
    found = _findings(doc)
    assert "of the 0.50 CPUs its cgroup's quota allows" in found["load_side"]["what"], found["load_side"]
    assert "the load side, not the service, was the limit" in found["load_side"]["what"]


def test_monitoring_knee_target_gives_its_memory_threads_and_connections_per_level(tmp_path: Path) -> None:
    t = start_target(lam=2000.0, sigma=0.0, kappa=0.0)
    try:
        r = knee_cli(
            "sweep", f"{t.url}/", "--levels", "1,16", "-d", "1.5", "--no-recovery", "--monitor-pid", str(t.pid),
            "--out", str(tmp_path),
        )  # fmt: skip
        stats = t.stats()
    finally:
        t.stop()
    assert r.returncode == 0, r.stderr
    doc = _record(tmp_path)
    lo, hi = (s["target"] for s in doc["steps"])
    assert lo["pid"] == hi["pid"] == t.pid
    assert hi["samples"] >= 2 and hi["alive"]
    assert lo["rss_mb_peak"] > 1 and hi["threads_peak"] >= 1 and hi["fds_peak"] > 16
    # every client holds one keep-alive connection to the target
    assert lo["connections_peak"]["ESTABLISHED"] == 1
    assert hi["connections_peak"]["ESTABLISHED"] == 16
    assert hi["cpu_s"] > 0
    usage = _findings(doc)["target_usage"]["what"]
    assert "per concurrent client" in usage and "of CPU per operation" in usage
    assert stats["requests"] >= sum(s["groups"]["main"]["succeeded"] for s in doc["steps"])


def test_a_monitor_that_names_no_process_is_one_sentence(tmp_path: Path) -> None:
    r = knee_cli("run", "-n", "1", "--monitor-name", "no-such-process-knee", "--", "true")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "--monitor-name 'no-such-process-knee': no running process has that name" in r.stderr
    r = knee_cli("run", "-n", "1", "--monitor-pid", "999999999", "--", "true")
    assert r.returncode != 0 and "Traceback" not in r.stderr


def test_failing_clients_that_spin_are_named_not_the_load_side(tmp_path: Path) -> None:
    # A pool of 1 (1-second operations) that answers 503 at once past it, and an exec client (curl) re-spawned
    # by every client as soon as it fails: 3 of 4 clients spin, spawning curl in a tight loop, and keep the load
    # side busy. The report tells one story: the clients spun on the service's refusals, with the rate of
    # failures and the pause that stops it; it does not call the load side the limit.
    t = start_target(lam=1.0, sigma=0.0, kappa=0.0, pool=1)
    out = tmp_path / "runs"
    curl = ["--", "curl", "-sf", "-o", "/dev/null", f"{t.url}/"]
    try:
        r = knee_cli("sweep", "--levels", "1,4", "-d", "2", "--no-recovery", "--out", str(out), *curl)
        single = knee_cli("run", "-c", "4", "-d", "1.5", *curl)
    finally:
        t.stop()
    assert r.returncode == 0, r.stderr
    # knee run says the same, in its warning
    assert "warning: the failing clients spun" in single.stdout and "--think-on-failure" in single.stdout
    assert "the load side was saturated" not in single.stdout
    (live,) = [line for line in r.stdout.splitlines() if line.startswith("sweep") and "level      4" in line]
    assert "[failing clients spin]" in live and "load side saturated" not in live
    doc = _record(out)
    top = doc["steps"][-1]["groups"]["main"]
    failed_hz = top["failed"] / top["elapsed_s"]
    assert failed_hz > 10 * top["rate_hz"], top  # the test provoked the spinning it is about
    found = _findings(doc)
    spun = found["spinning"]
    assert spun["level"] == 4
    print("load side at 4 clients:", doc["steps"][-1]["generator"])
    assert f"failures at {fmt.rate(failed_hz)} against successes at {fmt.rate(top['rate_hz'])}" in spun["what"]
    assert "--think-on-failure" in spun["fix"]
    # the spinning curls are knee's own children: at 4 clients neither the load side nor a machine shared with others
    # (the findings of that step alone: at 1 client, calm, a machine busy with other tests' load is rightly shared)
    record = RunDir(next(out.iterdir())).load()
    (v,) = [v for v in record.verdicts if v.group == "main"]
    at_4 = findings(record.model_copy(update={"steps": record.steps[-1:]}), v)
    assert record.steps[-1].level == 4 and not {"load_side", "shared_machine"} & {f.kind for f in at_4}, at_4
    assert "load_side" not in found, found
    report = (next(out.iterdir()) / "report.md").read_text()
    for text in (r.stdout.replace("\n", " "), report):
        assert "the failing clients spun" in text
        assert "the load side, not the service" not in text
        assert "measure the load generator as much as the service" not in text


# nginx with one worker that compresses what it serves at gzip's costliest level
GZIP_NGINX = """\
worker_processes 1; user root; daemon off; pid {dir}/nginx.pid; error_log {dir}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    gzip on; gzip_comp_level 9; gzip_min_length 0; gzip_types text/plain;
    client_body_temp_path {dir}/tmp; proxy_temp_path {dir}/tmp; fastcgi_temp_path {dir}/tmp;
    uwsgi_temp_path {dir}/tmp; scgi_temp_path {dir}/tmp;
    server {{ listen 127.0.0.1:{port}; location / {{ root {dir}; default_type text/plain; }} }}
}}
"""


@pytest.mark.alone  # nginx's worker at a whole core
def test_a_single_worker_nginx_at_one_whole_core_is_its_own_limit(tmp_path: Path) -> None:
    # One nginx worker compressing a 600 kB page at gzip level 9 for every request: a few clients keep its one
    # thread busy, on a machine with more cores. The monitored target's process at a whole core is a finding,
    # though the tree used far less than all the cores (the target_cpu rule's threshold).
    words = [f"{i * 7919 % 100003:x}{i % 17}" for i in range(5000)]
    (tmp_path / "page.txt").write_text(" ".join(words[i * i % len(words)] for i in range(100_000)))
    port = free_port()
    (tmp_path / "nginx.conf").write_text(GZIP_NGINX.format(dir=tmp_path, port=port))
    nginx = popen_nginx(tmp_path / "nginx.conf", tmp_path)
    out = tmp_path / "runs"
    try:
        wait_for_port(port)
        r = knee_cli(
            "sweep", f"http://127.0.0.1:{port}/page.txt", "-H", "Accept-Encoding: gzip", "--levels", "1,4", "-d", "2",
            "--no-recovery", "--monitor-pid", str(nginx.pid), "--out", str(out),
        )  # fmt: skip
    finally:
        nginx.terminate()
        nginx.wait(10)
    assert r.returncode == 0, r.stderr
    doc = _record(out)
    top = doc["steps"][-1]
    busiest = top["target"]["busiest"]
    print("the busiest process at 4 clients:", busiest, "the tree:", top["target"]["cpu_cores_mean"])
    assert busiest["command"] == "nginx: worker process" and busiest["threads"] == 1, busiest
    assert busiest["pid"] != nginx.pid  # the worker, not the master nginx started with
    assert max(busiest["cpu_cores"], busiest["runnable_cores"]) >= 0.9, busiest  # the test pinned it
    found = _findings(doc)
    cores = top["generator"]["cores_available"]
    if cores == 1:  # one core: the whole machine's, which target_cpu says
        assert "target_cpu" in found and "target_core" not in found
        return
    core = found["target_core"]
    assert core["level"] <= 4
    assert f"nginx's process {busiest['pid']} “nginx: worker process”" in core["what"]
    assert "a whole core" in core["what"] and "a single-threaded limit" in core["what"]
    assert "worker_processes" in core["fix"]
    assert core["what"] in (next(out.iterdir()) / "report.md").read_text()
