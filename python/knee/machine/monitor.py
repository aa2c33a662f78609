"""The target's process tree on this machine over a step (`--monitor-pid`, `--monitor-name`, `[monitor]`):
CPU, RSS, threads, open files, TCP connections by state and how full the accept queue of each listening
socket got (netlink sock_diag, as `ss`: a listening socket's receive queue is its accept queue, its send
queue that queue's limit), and the process that wanted the most CPU (`TargetStats.busiest`: what it used, and
how long it ran or waited for a CPU, from /proc/PID/schedstat, for a single-threaded process)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass

import psutil

from knee.errors import UserError
from knee.machine.kernel import PROC, SAMPLE_S, Ticker
from knee.machine.sockets import tcp_sockets
from knee.model import BusiestProcess, ListenSocket, TargetStats


def find_process(pid: int | None = None, name: str | None = None) -> psutil.Process:
    """The process to monitor, by pid or by name (its command's name or its executable's base name; the
    oldest match whose parent does not match too, i.e. the top of a server's process tree)."""
    if pid is not None:
        try:
            return psutil.Process(pid)
        except psutil.NoSuchProcess:
            raise UserError(f"--monitor-pid {pid}: no such process; give the pid of the running service") from None
        except psutil.Error as exc:
            raise UserError(f"--monitor-pid {pid}: cannot read it ({exc}); run knee as its user or as root") from None
    if not name:
        raise UserError("monitor needs a pid or a name: --monitor-pid PID or --monitor-name NAME")
    found: list[psutil.Process] = []
    for p in psutil.process_iter(["name", "exe", "cmdline"]):
        info = p.info
        argv0 = os.path.basename((info.get("cmdline") or [""])[0] or "")
        exe = os.path.basename(info.get("exe") or "")
        if name in (info.get("name"), argv0, exe) and p.pid != os.getpid():
            found.append(p)
    if not found:
        raise UserError(
            f"--monitor-name {name!r}: no running process has that name; check `pgrep -l {name}` or use --monitor-pid"
        )
    pids = {p.pid for p in found}
    tops = [p for p in found if p.ppid() not in pids]
    return min(tops or found, key=lambda p: p.create_time())


def _socket_inodes(pids: list[int]) -> set[int]:
    out: set[int] = set()
    for pid in pids:
        fd_dir = PROC / str(pid) / "fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in names:
            try:
                link = os.readlink(fd_dir / fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                out.add(int(link[8:-1]))
    return out


def _runnable_s(pid: int, threads: int) -> float | None:
    """Seconds a single-threaded process has run or waited on a run queue (/proc/PID/schedstat: its first two
    fields, in ns; one read a sample). None for a process of several threads (a read per thread would cost
    a sampler tens of µs each) or where the kernel does not say."""
    if threads != 1:
        return None
    try:
        ran, waited, _ = (PROC / str(pid) / "schedstat").read_text().split()
        return (int(ran) + int(waited)) / 1e9
    except (OSError, ValueError):
        return None


@dataclass
class _Seen:
    """One process of the tree over the step: its first and latest sample (time, CPU seconds, runnable seconds)."""

    command: str
    t0: float
    cpu0: float
    run0: float | None
    t: float
    cpu: float
    run: float | None
    threads: int = 0
    peak: float = 0.0  # the most cores between two samples

    def see(self, now: float, cpu: float, run: float | None, threads: int) -> None:
        if now > self.t:
            self.peak = max(self.peak, (cpu - self.cpu) / (now - self.t))
        self.t, self.cpu, self.threads = now, cpu, threads
        self.run = run if self.run0 is not None else None

    def cores(self) -> float:
        return (self.cpu - self.cpu0) / (self.t - self.t0) if self.t > self.t0 else 0.0

    def runnable(self) -> float:
        if self.run is None or self.run0 is None or self.t <= self.t0:
            return 0.0
        return max(0.0, self.run - self.run0) / (self.t - self.t0)

    def wanted(self) -> float:
        """The cores it ran or would have run: runnable where known, else used."""
        return max(self.cores(), self.runnable())


def _command(p: psutil.Process) -> str:
    """The command line as `ps` shows it (a server that rewrites its own: "nginx: worker process")."""
    with contextlib.suppress(psutil.Error, OSError):
        return " ".join(a for a in p.cmdline() if a).strip() or p.name()
    return ""


class TargetMonitor:
    """The target's process tree between `start()` and `stop()`."""

    def __init__(self, pid: int | None = None, name: str | None = None, every_s: float = SAMPLE_S) -> None:
        self.proc = find_process(pid, name)
        self._name = name or self.proc.name()
        self._lock = threading.Lock()
        self._every = every_s
        self._reset()

    def _reset(self) -> None:
        self._out = TargetStats(pid=self.proc.pid, name=self._name)
        with contextlib.suppress(psutil.Error, OSError, AttributeError):
            self._out.fd_limit = int(self.proc.rlimit(psutil.RLIMIT_NOFILE)[0])
        self._cpu: dict[int, float] = {}  # pid -> CPU seconds at its first sample in this step
        self._cpu_last: dict[int, float] = {}
        self._rss_sum = 0.0
        self._t_prev: float | None = None
        self._cpu_prev = 0.0
        self._listen: dict[int, ListenSocket] = {}
        self._seen: dict[int, _Seen] = {}
        self._t0 = time.monotonic()

    def _tree(self) -> list[psutil.Process]:
        try:
            return [self.proc, *self.proc.children(recursive=True)]
        except psutil.Error:
            return []

    def _sample(self) -> None:
        tree = self._tree()
        now = time.monotonic()
        rss = 0
        threads = fds = 0
        pids = []
        for p in tree:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    rss += p.memory_info().rss
                    mine = p.num_threads()
                    fds += p.num_fds()
            except psutil.Error:
                continue
            threads += mine
            pids.append(p.pid)
            cpu = t.user + t.system
            self._cpu.setdefault(p.pid, cpu)
            self._cpu_last[p.pid] = cpu
            run = _runnable_s(p.pid, mine)
            seen = self._seen.get(p.pid)
            if seen is None:
                self._seen[p.pid] = _Seen(_command(p), now, cpu, run, now, cpu, run, mine)
            else:
                seen.see(now, cpu, run, mine)
        states: dict[str, int] = {}
        listen: dict[int, tuple[int, int]] = {}  # port -> (accept queue, its limit)
        if pids:
            mine = _socket_inodes(pids)
            for inode, (state, port, rq, wq) in tcp_sockets().items():
                if inode in mine:
                    states[state] = states.get(state, 0) + 1
                    if state == "LISTEN":
                        listen[port] = (max(listen.get(port, (0, 0))[0], rq), wq)
        with self._lock:
            o = self._out
            if not pids:
                o.alive = False
                return
            o.samples += 1
            o.processes_peak = max(o.processes_peak, len(pids))
            o.rss_mb_peak = round(max(o.rss_mb_peak, rss / 1e6), 2)
            self._rss_sum += rss / 1e6
            o.threads_peak = max(o.threads_peak, threads)
            o.fds_peak = max(o.fds_peak, fds)
            for state, n in states.items():
                o.connections_peak[state] = max(o.connections_peak.get(state, 0), n)
            for port, (q, limit) in listen.items():
                ls = self._listen.setdefault(port, ListenSocket(port=port))
                ls.queue_peak = max(ls.queue_peak, q)
                ls.backlog = limit
            cpu = sum(self._cpu_last[p] - self._cpu[p] for p in self._cpu_last)
            if self._t_prev is not None and now > self._t_prev:
                o.cpu_cores_peak = round(max(o.cpu_cores_peak, (cpu - self._cpu_prev) / (now - self._t_prev)), 3)
            self._t_prev, self._cpu_prev = now, cpu

    def start(self) -> TargetMonitor:
        with self._lock:
            self._reset()
        self._ticker = Ticker(self._sample, self._every)
        self._ticker.start()
        return self

    def stop(self) -> TargetStats:
        self._ticker.finish()
        with self._lock:
            o = self._out
            elapsed = max(1e-9, time.monotonic() - self._t0)
            o.cpu_s = round(sum(self._cpu_last[p] - self._cpu[p] for p in self._cpu_last), 3)
            o.cpu_cores_mean = round(o.cpu_s / elapsed, 3)
            o.rss_mb_mean = round(self._rss_sum / o.samples, 2) if o.samples else 0.0
            o.listen = sorted(self._listen.values(), key=lambda s: s.port)
            o.busiest = self._busiest()
            return o.model_copy(deep=True)

    def _busiest(self) -> BusiestProcess | None:
        """The process that wanted the most CPU over the step (sampled at least twice)."""
        watched = [(pid, s) for pid, s in self._seen.items() if s.t > s.t0]
        if not watched:
            return None
        pid, s = max(watched, key=lambda x: x[1].wanted())
        return BusiestProcess(
            pid=pid,
            command=s.command,
            threads=s.threads,
            cpu_cores=round(s.cores(), 3),
            cpu_cores_peak=round(s.peak, 3),
            runnable_cores=round(s.runnable(), 3),
        )
