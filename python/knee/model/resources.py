"""What was true of the machines during a step: the load side's CPU and kernel counters, and the monitored
target's process tree (`knee.machine` and the executors fill these in)."""

from pydantic import BaseModel, Field


class GeneratorStats(BaseModel):
    """The load side's CPU during a step: knee's own, its child processes' (exec clients, worker
    programs) and the whole machine's, to flag a step the load side rather than the service limited."""

    cpu_s: float = 0.0  # knee's own process
    cpu_cores: float = 0.0  # cpu_s / elapsed_s: 1.0 = one core fully busy
    children_cpu_s: float = 0.0  # knee's child processes (exec clients, worker programs)
    children_cpu_cores: float = 0.0
    machine_cpu_cores: float = 0.0  # busy cores of the whole machine, every process included
    cores_busy: float = 0.0  # busy cores among those knee may run on (its affinity), every process included
    cores_available: int = 1
    cpu_quota: float = Field(
        default=0.0,
        description="the CPUs a cgroup's CPU quota (a container's limit) let knee use, when fewer than "
        "cores_available; 0: none",
    )
    machine_cores: int = Field(default=0, description="the machine's CPUs (0: not recorded, an older run)")
    # knee and its children used ≥ 90 % of the cores they may run on, or those cores were ≥ 90 % busy and
    # knee and its children held at least half of them
    saturated: bool = False

    @property
    def load_cores(self) -> float:
        """knee's cores plus its children's."""
        return self.cpu_cores + self.children_cpu_cores

    def cores_words(self) -> str:
        """What knee could use, after 'of': '2 cores', or 'the 0.50 CPUs its cgroup's quota allows'."""
        if self.cpu_quota:
            return f"the {self.cpu_quota:.2f} CPUs its cgroup's quota allows"
        return f"{self.cores_available} cores"

    def others(self) -> str:
        """'; other processes took 0.40 of them' when others used a tenth of knee's cores or more, else ''."""
        rest = self.cores_busy - self.load_cores
        return f"; other processes took {rest:.2f} of them" if rest >= 0.1 * self.cores_available else ""


class HostCounters(BaseModel):
    """The load machine's kernel counters over a step (knee.machine.kernel), sampled about once a second:
    deltas of event counters, peaks of gauges. Linux only; empty elsewhere."""

    samples: int = 0
    # /proc/net/netstat TcpExt: connections the kernel dropped because a listen queue was full
    listen_overflows: int = 0
    listen_drops: int = 0
    syn_retrans: int = 0  # TcpExt TCPSynRetrans: SYNs sent again (a SYN dropped or unanswered)
    # /proc/net/snmp Tcp
    attempt_fails: int = 0  # connects that failed (refused, reset in SYN-RECV)
    estab_resets: int = 0  # established connections reset
    out_rsts: int = 0  # resets sent
    retrans_segs: int = 0
    # /proc/net/sockstat gauges (peaks over the step)
    tcp_inuse_peak: int = 0
    time_wait_peak: int = 0
    ephemeral_ports: int = 0  # the size of net.ipv4.ip_local_port_range
    # netlink sock_diag: ports of that range held by a socket that is not listening (TIME_WAIT included)
    ephemeral_in_use_peak: int = 0
    tcp_states_peak: dict[str, int] = Field(default_factory=dict)  # TCP sockets by state: each state's peak
    # listening port -> the most connections waiting in its accept queue in one census (ports with some only):
    # a server on this machine that stopped accepting, or accepted slower than connections came
    accept_queue_peak: dict[int, int] = Field(default_factory=dict)
    somaxconn: int = 0  # net.core.somaxconn: the cap on every listen queue of this machine
    mem_used_mb_peak: float = 0.0  # MemTotal - MemAvailable
    mem_total_mb: float = 0.0

    def merge(self, other: "HostCounters") -> None:
        """Another machine's counters: events add up, peaks take the highest."""
        for k in ("samples", "listen_overflows", "listen_drops", "syn_retrans", "attempt_fails", "estab_resets"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.out_rsts += other.out_rsts
        self.retrans_segs += other.retrans_segs
        peaks = ("tcp_inuse_peak", "time_wait_peak", "ephemeral_ports", "ephemeral_in_use_peak", "somaxconn")
        for k in (*peaks, "mem_used_mb_peak", "mem_total_mb"):
            setattr(self, k, max(getattr(self, k), getattr(other, k)))
        for state, n in other.tcp_states_peak.items():
            self.tcp_states_peak[state] = max(self.tcp_states_peak.get(state, 0), n)
        for port, n in other.accept_queue_peak.items():
            self.accept_queue_peak[port] = max(self.accept_queue_peak.get(port, 0), n)


class ListenSocket(BaseModel):
    """One listening socket of the monitored target: its port, its backlog and how full its queue got."""

    port: int
    backlog: int = 0  # the accept queue's length limit (min of the server's backlog and somaxconn); 0 = unknown
    queue_peak: int = 0  # the most connections waiting to be accepted in one sample


class BusiestProcess(BaseModel):
    """The process of the monitored tree that wanted the most CPU over a step: a single-threaded server (one
    nginx worker) or a process serialised by one lock is limited to one core, whatever the machine has."""

    pid: int
    command: str = ""  # its command line as `ps` shows it ("nginx: worker process")
    threads: int = 0
    cpu_cores: float = 0.0  # its CPU seconds ÷ the seconds it was sampled
    cpu_cores_peak: float = 0.0  # the most between two samples
    # a single-threaded process's running or waiting for a CPU (/proc/PID/schedstat): what it wanted, even on a
    # machine whose CPUs other processes held; 0 = unknown (several threads, or no schedstat)
    runnable_cores: float = 0.0


class TargetStats(BaseModel):
    """The monitored target's process tree over a step (`--monitor-pid`, `--monitor-name`, `[monitor]`)."""

    pid: int
    name: str = ""
    alive: bool = True  # False: the process was gone at some sample (it crashed or was restarted)
    samples: int = 0
    processes_peak: int = 0
    cpu_s: float = 0.0  # CPU seconds of the tree over the step
    cpu_cores_mean: float = 0.0
    cpu_cores_peak: float = 0.0
    rss_mb_mean: float = 0.0
    rss_mb_peak: float = 0.0
    threads_peak: int = 0
    fds_peak: int = 0
    fd_limit: int = 0  # the top process's soft RLIMIT_NOFILE; 0 = unknown
    connections_peak: dict[str, int] = Field(default_factory=dict, description="TCP connections by state, peaks")
    listen: list[ListenSocket] = Field(default_factory=list)
    busiest: BusiestProcess | None = None  # the process that wanted the most CPU (running or runnable)


class SoakSample(BaseModel):
    """A soak's memory at the end of one of its windows (an interval): the monitored target's and knee's own."""

    t_s: float = Field(description="seconds after the soak's measurement began (its warm-up's end), as its series")
    target_rss_mb: float | None = Field(default=None, description="the target's tree, mean over the window")
    target_fds: int | None = Field(default=None, description="the target's tree's open descriptors, the window's peak")
    knee_rss_mb: float = Field(description="knee's own process at the window's end")


class TargetHost(BaseModel):
    """Where a network group's service ran, as the machine that ran the sweep saw it when the run started
    (knee.machine.network.target_hosts): the findings read it, so `knee report` elsewhere does no lookup."""

    host: str
    port: int
    local: bool = Field(description="the host resolved to the load machine: a loopback address or one of its own")


class RemoteMetric(BaseModel):
    """A metric the user named (`[monitor] metrics`), summed over its series, over a step."""

    kind: str = Field(description="counter (its rate per second is summarised) or gauge (its value)")
    mean: float = Field(description="a gauge's mean value, or a counter's mean rate per second")
    peak: float = Field(description="a gauge's highest value, or a counter's highest rate between two scrapes")


class RemoteStats(BaseModel):
    """One Prometheus endpoint (`[monitor] prometheus`, `--monitor-url`) over a step: node_exporter's figures of its
    host, postgres_exporter's connections, the metrics the user named. A figure the endpoint did not give is null."""

    url: str = Field(description="the endpoint, its user and password left out")
    host: str = Field(description="host:port of the endpoint")
    samples: int = Field(default=0, description="scrapes that answered with Prometheus text")
    failed: int = Field(default=0, description="scrapes that did not (no answer, an error, not Prometheus text)")
    error: str = Field(default="", description="why the first failed scrape of the step failed")
    cpus: int = 0
    cpu_busy: float | None = Field(default=None, description="share of its CPUs' time not idle nor in iowait")
    cpu_busy_peak: float | None = Field(default=None, description="the highest busy share between two scrapes")
    cpu_modes: dict[str, float] = Field(default_factory=dict, description="share of its CPUs' time in each mode")
    load1_peak: float | None = None
    mem_used_mb_peak: float | None = Field(default=None, description="MemTotal - MemAvailable at its highest")
    mem_total_mb: float | None = None
    listen_overflows: int | None = Field(default=None, description="TcpExt ListenOverflows over the step")
    listen_drops: int | None = Field(default=None, description="TcpExt ListenDrops over the step")
    tcp_established_peak: int | None = None
    time_wait_peak: int | None = None
    tcp_states_peak: dict[str, int] = Field(default_factory=dict, description="node_tcp_connection_states, peaks")
    context_switches_per_s: float | None = None
    pg_connections_peak: int | None = Field(default=None, description="postgres_exporter: backends at their most")
    pg_max_connections: int | None = None
    pg_reserved_connections: int | None = Field(default=None, description="superuser_reserved_connections")
    metrics: dict[str, RemoteMetric] = Field(default_factory=dict, description="the metrics the user named")
