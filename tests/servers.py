"""Real servers for the tests, started on free loopback ports and stopped by PID."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from knee.engine import ShardResult
from knee.executor import Interrupts, run_step
from knee.model import RunRecord
from knee.spec import EngineSpec

if TYPE_CHECKING:
    from knee.demo_target import TargetProcess

# What every nginx of the tests shares: one worker, in the foreground, its files in its own directory.
NGINX_HEAD = """\
worker_processes 1;
user root;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
"""


def nginx_conf(log_format: str, servers: str) -> str:
    """A config of nginx's own (for `nginx_with`): NGINX_HEAD, each request logged to {dir}/access.log as
    `log_format` (nginx's variables), keep-alive connections held for a million requests, then `servers` (server
    blocks; braces doubled for str.format, {port} the free port)."""
    logged = (
        f"    log_format logged '{log_format}';\n"
        "    access_log {dir}/access.log logged;\n"
        "    keepalive_requests 1000000;\n"
    )
    return NGINX_HEAD + logged + servers + "}}\n"


NGINX_CONF = (
    NGINX_HEAD
    + """\
    log_format counted '$connection $request_method $uri $status $remote_addr';
    access_log {dir}/access.log counted;
    # what each request carried, to hold a secret knee sent against what it wrote (tests/integration/test_secrets.py)
    log_format credentials '$uri|$http_authorization|$http_proxy_authorization|$http_cookie';
    access_log {dir}/credentials.log credentials;
    keepalive_requests 1000000;
    server {{
        listen {listen}:{port};
        location / {{ default_type text/plain; return 200 "hello from nginx\\n"; }}
        location /files/ {{ alias {dir}/files/; }}
        location /missing {{ return 404; }}
        location /echo-credentials {{ return 401 "denied: $http_authorization $http_cookie\n"; }}
    }}
}}
"""
)


SESSION_PASSWORD = "s3cret-pw"


def session_target() -> AbstractContextManager[TargetProcess]:
    """`knee target basic` behind a login (POST /login with SESSION_PASSWORD) whose /files/doc (1000 bytes) only a
    logged-in session may read: the target of the flows and worker programs that log in."""
    from knee.demo_target import start_target

    login = {"path": "/login", "password": SESSION_PASSWORD}
    return start_target("basic", login=login, paths={"/files/doc": {"session": True, "bytes": 1000}})


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """`n` different free ports: each held while the next is chosen (two calls of free_port can return the same
    port, and a server given it twice listens once and proxies to itself: /tmp/par6, test_import)."""
    held = [socket.socket() for _ in range(n)]
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


def wait_for_port(port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout_s} s")


def popen_nginx(conf: Path, d: Path) -> subprocess.Popen:
    """nginx (on PATH, else Debian's /usr/sbin/nginx) started with config `conf` and prefix `d`; its stderr dropped."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(binary):
        raise RuntimeError("nginx is not installed: run `make ci-deps` (scripts/install-system-deps.sh)")
    return subprocess.Popen([binary, "-c", str(conf), "-p", str(d)], stderr=subprocess.DEVNULL)


@contextlib.contextmanager
def nginx_with(template: str, d: Path) -> Iterator[int]:
    """nginx with its own config, `template` formatted with `dir` (d) and a free `port`, its files in `d`: yields the
    port; stopped by its PID on exit."""
    port = free_port()
    conf = d / "nginx.conf"
    conf.write_text(template.format(dir=d, port=port))
    proc = popen_nginx(conf, d)
    try:
        wait_for_port(port)
        yield port
    finally:
        stop_process(proc)


@dataclass
class Nginx:
    """nginx from Debian, one worker, its own config and logs in a temp dir."""

    dir: Path
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def access_lines(self) -> list[str]:
        # nginx writes the access log unbuffered (no `buffer=`), so it is complete when requests are answered.
        path = self.dir / "access.log"
        return path.read_text().splitlines() if path.exists() else []

    def credential_lines(self) -> list[tuple[str, str, str, str]]:
        """(path, Authorization, Proxy-Authorization, Cookie) of every request since `clear_log` ('-': none)."""
        path = self.dir / "credentials.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [tuple(line.split("|", 3)) for line in lines]  # type: ignore[misc]

    def clear_log(self) -> None:
        (self.dir / "access.log").write_text("")
        (self.dir / "credentials.log").write_text("")

    def stop(self) -> None:
        stop_process(self.proc, signal.SIGQUIT)


def start_nginx(tmp: Path, listen: str = "127.0.0.1") -> Nginx:
    """nginx on a free port of `listen` (0.0.0.0: every address of this namespace, for tests that make their
    own network namespaces); its access log names each request's connection, method, path, status, peer."""
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(dir=tmp, port=port, listen=listen))
    proc = popen_nginx(conf, tmp)
    wait_for_port(port)
    return Nginx(dir=tmp, port=port, proc=proc)


def pids_alive(pids: list[int]) -> list[int]:
    """The pids that still exist (zombies of other parents count as gone)."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def http_spec(
    url: str, clients: int, stop: dict[str, int], *, warmup_ms: int = 0, timeout_ms: int = 5000
) -> dict[str, Any]:
    """An engine spec (docs/engine-spec.md) of one closed-loop http group "main" on one thread."""
    return {
        "threads": 1,
        "groups": [
            {
                "name": "main",
                "clients": clients,
                "stop": stop,
                "warmup_ms": warmup_ms,
                "timeout_ms": timeout_ms,
                "client": {"kind": "http", "url": url},
            }
        ],
    }


def run_spec(spec: dict[str, Any]) -> ShardResult:
    """Run an engine spec (docs/engine-spec.md) to its end through knee's one executor loop."""
    return run_step(EngineSpec.model_validate(spec), Interrupts()).result


def settled(count: Callable[[], int], want: int, timeout_s: float = 2.0) -> int:
    """`count()` once it equals `want`, or after `timeout_s` of waiting for it (a server may count a
    request a moment after knee has dropped its connection)."""
    deadline = time.monotonic() + timeout_s
    value = count()
    while value != want and time.monotonic() < deadline:
        time.sleep(0.01)
        value = count()
    return value


def sent(record: RunRecord) -> int:
    """Every operation a run started: in its steps (each ends as one outcome), in its warm-ups, and the single
    operations that probed whether the service was at rest before a step (StepResult.settle)."""
    for s in record.steps:
        for g in s.groups.values():
            assert g.started == g.succeeded + g.failed + g.hung + g.abandoned
    return sum(g.started + g.warmup_ops for s in record.steps for g in s.groups.values()) + record.probes


PROMETHEUS_CONF = """\
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: knee
    static_configs:
      - targets: [{targets}]
"""


@dataclass
class Served:
    """A server process a test started: stopped by its PID (`stop`, or leaving `with`)."""

    port: int
    proc: subprocess.Popen[bytes]

    def stop(self) -> None:
        stop_process(self.proc)

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class Prometheus(Served):
    """A Prometheus server from Debian, scraping `targets` every second, its storage in a temp dir."""

    dir: Path = field(kw_only=True)

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """The result of an instant query (its `data.result`: one {metric, value} per series)."""
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        url = f"http://127.0.0.1:{self.port}/api/v1/query?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        return doc["data"]["result"]  # type: ignore[no-any-return]


def stop_process(proc: subprocess.Popen[bytes], how: signal.Signals = signal.SIGTERM, wait_s: float = 10) -> None:
    """`how` (SIGTERM; nginx's graceful stop is SIGQUIT), then SIGKILL after `wait_s`, by PID."""
    if proc.poll() is None:
        proc.send_signal(how)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def kill_if_running(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL, by PID, and reaped, unless it has ended: a test's `finally`, so that nothing outlives a failure."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def spawn_listening(argv: list[str], ports: list[int], timeout_s: float = 15, **popen: Any) -> subprocess.Popen[bytes]:
    """`argv` started (no standard input) and its `ports` listening on 127.0.0.1; killed, by PID, if they are not
    within `timeout_s` each."""
    proc: subprocess.Popen[bytes] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, **popen)
    try:
        for port in ports:
            wait_for_port(port, timeout_s)
    except BaseException:
        kill_if_running(proc)
        raise
    return proc


def wait_for_http(url: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {timeout_s} s") from None
            time.sleep(0.05)


def start_prometheus(tmp: Path, targets: list[str]) -> Prometheus:
    """Prometheus on a free port scraping `targets` ("127.0.0.1:PORT") every second."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise RuntimeError("prometheus is not installed: run `make ci-deps` (scripts/install-system-deps.sh)")
    tmp.mkdir(parents=True, exist_ok=True)
    conf = tmp / "prometheus.yml"
    conf.write_text(PROMETHEUS_CONF.format(targets=", ".join(f"'{t}'" for t in targets)))
    port = free_port()
    with (tmp / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen(
            [binary, f"--config.file={conf}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    wait_for_http(f"http://127.0.0.1:{port}/-/ready")
    return Prometheus(port, proc, dir=tmp)


class NodeExporter(Served):
    """prometheus-node-exporter from Debian on a free loopback port."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"


def start_node_exporter() -> NodeExporter:
    binary = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if binary is None:
        raise RuntimeError("prometheus-node-exporter is not installed: run `make ci-deps`")
    port = free_port()
    proc = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for_http(f"http://127.0.0.1:{port}/metrics")
    return NodeExporter(port, proc)


TLS_NGINX_CONF = (
    NGINX_HEAD
    + """\
    # each request: its connection, whether its TLS session was resumed (r) or not (.), the status, the
    # client certificate's subject, the HTTP version
    log_format tls '$connection $ssl_session_reused $status "$ssl_client_s_dn" $server_protocol';
    log_format h2c '$connection $status $server_protocol';
    log_format tlsany '$status "$ssl_client_s_dn" "$ssl_client_i_dn" "$ssl_client_verify"';
    log_format sni '$ssl_server_name|$host|$status';
    keepalive_requests 1000000;
    server {{
        # HTTP/1.1 and HTTP/2 (ALPN) over TLS, with the client's certificate required (nginx answers 400
        # without one, or with one it does not trust, rather than failing the handshake)
        listen 127.0.0.1:{tls_port} ssl http2;
        ssl_certificate {pki}/server-chain.pem;
        ssl_certificate_key {pki}/server.key;
        ssl_client_certificate {pki}/root.pem;
        ssl_verify_client on;
        ssl_verify_depth 3;
        ssl_session_cache shared:SSL:1m;
        ssl_session_tickets on;
        access_log {dir}/tls.log tls;
        location / {{ default_type text/plain; return 200 "hello tls\\n"; }}
    }}
    server {{
        # a client certificate logged with its issuer and nginx's verdict (optional_no_ca: a request comes
        # even from an unknown CA): nginx's OpenSSL 3.0 cannot be told to allow grid proxies (RFC 3820),
        # so it answers a proxy 400, but shows what the client presented
        listen 127.0.0.1:{tlsany_port} ssl;
        ssl_certificate {pki}/server-chain.pem;
        ssl_certificate_key {pki}/server.key;
        ssl_verify_client optional_no_ca;
        ssl_verify_depth 4;
        access_log {dir}/tlsany.log tlsany;
        location / {{ default_type text/plain; return 200 "hello tls\\n"; }}
    }}
    server {{
        # TLS 1.2 only, no client certificate: a TLS 1.3 client gets the server's alert
        listen 127.0.0.1:{tls12_port} ssl;
        ssl_protocols TLSv1.2;
        ssl_certificate {pki}/server-chain.pem;
        ssl_certificate_key {pki}/server.key;
        access_log {dir}/tls12.log sni;  # the name the client gave in its TLS hello, and in Host
        location / {{ default_type text/plain; return 200 "hello tls 1.2\\n"; }}
    }}
    server {{
        # HTTP/2 with prior knowledge (h2c)
        listen 127.0.0.1:{h2c_port} http2;
        access_log {dir}/h2c.log h2c;
        location / {{ default_type text/plain; return 200 "hello h2c\\n"; }}
    }}
    server {{
        # h2c again, but GOAWAY after every 50 requests of a connection (keepalive_requests; nginx 1.19.7+)
        listen 127.0.0.1:{goaway_port} http2;
        keepalive_requests 50;
        access_log {dir}/goaway.log h2c;
        location / {{ default_type text/plain; return 200 "hello h2c\\n"; }}
    }}
}}
"""
)


@dataclass
class TlsNginx:
    """nginx from Debian serving TLS (client certificates required) and HTTP/2, each listener with its own log."""

    dir: Path
    ports: dict[str, int]  # tls, tlsany, tls12, h2c, goaway
    proc: subprocess.Popen[bytes]

    def url(self, listener: str) -> str:
        scheme = "https" if listener.startswith("tls") else "http"
        return f"{scheme}://127.0.0.1:{self.ports[listener]}/"

    def lines(self, listener: str) -> list[str]:
        """The access log of one listener (nginx writes it unbuffered)."""
        path = self.dir / f"{listener}.log"
        return path.read_text().splitlines() if path.exists() else []

    def clear(self) -> None:
        for name in self.ports:
            (self.dir / f"{name}.log").write_text("")

    def stop(self) -> None:
        Nginx(self.dir, 0, self.proc).stop()


def start_tls_nginx(tmp: Path, pki_dir: Path) -> TlsNginx:
    """nginx with a TLS listener requiring client certificates of `pki_dir`'s root (tests/pki.py), one that takes
    any client certificate unverified, a TLS 1.2-only one, an h2c one and an h2c one that sends GOAWAY every 50
    requests."""
    tmp.mkdir(parents=True, exist_ok=True)
    names = ("tls", "tlsany", "tls12", "h2c", "goaway")
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    conf = tmp / "nginx.conf"
    conf.write_text(TLS_NGINX_CONF.format(dir=tmp, pki=pki_dir, **{f"{k}_port": v for k, v in ports.items()}))
    proc = popen_nginx(conf, tmp)
    for port in ports.values():
        wait_for_port(port)
    return TlsNginx(dir=tmp, ports=ports, proc=proc)


LEAKY = """
import http.server, sys

kept = []


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the reply's headers and body go out at once, not 40 ms apart

    def do_POST(self):
        kept.append(self.rfile.read(int(self.headers["Content-Length"])))  # every body, never let go
        self._reply(b"ok")

    def do_GET(self):  # the test's own questions: how many bodies kept, and its resident memory
        rss = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmRSS:"))
        self._reply(f"{len(kept)} {rss}".encode())

    def _reply(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


class Leaky:
    """A server that keeps every request body it is sent (it leaks): test_soak's, and the soak picture's of
    scripts/load-shape-pictures.py. GET answers how many it kept and its resident memory (kB)."""

    def __init__(self, tmp: Path) -> None:
        (tmp / "leaky.py").write_text(LEAKY)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.proc = subprocess.Popen([sys.executable, str(tmp / "leaky.py"), str(self.port)])
        wait_for_port(self.port, 20)

    def kept_and_rss_kb(self) -> tuple[int, int]:
        with urllib.request.urlopen(self.url, timeout=10) as r:
            kept, rss = r.read().decode().split()
        return int(kept), int(rss)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
