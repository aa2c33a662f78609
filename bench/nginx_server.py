"""The nginx that `make bench` measures against: one worker, pinned to one core, on free 127.0.0.1 ports: HTTP/1.1
(`url`), HTTP/2 with prior knowledge (`h2c_url`) and HTTPS with a certificate made at start (`tls_url`)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import string
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from measure import die_with_parent

TEMPLATE = Path(__file__).with_name("nginx.conf.tmpl")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.path.exists(p)), None)


def nginx_version() -> str:
    binary = nginx_binary()
    if binary is None:
        return "not installed"
    out = subprocess.run([binary, "-v"], check=False, capture_output=True, text=True, timeout=10)
    return (out.stderr or out.stdout).strip().removeprefix("nginx version: ")


class Nginx:
    """`with Nginx(cpu=0) as n: n.url` — started on enter, stopped by its PID on exit."""

    def __init__(self, cpu: int, connections: int = 12000, workers: int = 1) -> None:
        """`connections` per worker process (each holds that many descriptors: at most the hard open-file limit)."""
        self.cpu = cpu
        self.connections = connections
        self.workers = workers
        self.dir = Path(tempfile.mkdtemp(prefix="knee-bench-nginx-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = self.h2c_port = self.tls_port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def h2c_url(self) -> str:
        return f"http://127.0.0.1:{self.h2c_port}/"

    @property
    def tls_url(self) -> str:
        return f"https://127.0.0.1:{self.tls_port}/"

    def url_for(self, mode: str) -> str:
        """The listener a mode's generators load: HTTP/2 with prior knowledge, HTTPS, or plain HTTP/1.1."""
        if mode == "h2":
            return self.h2c_url
        return self.tls_url if mode.startswith("https") else self.url

    def _certificate(self) -> None:
        """A self-signed EC P-256 certificate for 127.0.0.1 (what a modern service presents)."""
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
             "-keyout", str(self.dir / "server.key"), "-out", str(self.dir / "server.pem")],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

    def __enter__(self) -> Nginx:
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError("nginx is not installed: run `make ci-deps` (scripts/install-system-deps.sh)")
        self._certificate()
        for _attempt in range(5):
            self.port, self.h2c_port, self.tls_port = free_port(), free_port(), free_port()
            conf = self.dir / "nginx.conf"
            conf.write_text(
                string.Template(TEMPLATE.read_text()).substitute(
                    user_line="user root;" if os.geteuid() == 0 else "",
                    workers=self.workers,
                    # several workers: one listening socket each (the kernel spreads connections evenly), and
                    # warnings logged (nginx says at warn level when it closes idle connections for lack of room)
                    reuseport=" reuseport" if self.workers > 1 else "",
                    log_level="warn" if self.workers > 1 else "error",
                    nofile=self.connections + 512,
                    connections=self.connections,
                    dir=self.dir,
                    port=self.port,
                    h2c_port=self.h2c_port,
                    tls_port=self.tls_port,
                    backlog=4096,
                )
            )
            log = (self.dir / "stderr.log").open("wb")
            argv = ["taskset", "-c", str(self.cpu), binary, "-e", "stderr", "-p", str(self.dir), "-c", str(conf)]
            self.proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=lambda: die_with_parent(signal.SIGTERM),  # noqa: PLW1509 - one prctl, no locks
            )
            if self._wait_ready(10.0):
                return self
            self._stop()
        raise RuntimeError(f"nginx did not start: {(self.dir / 'stderr.log').read_text()[-500:]}")

    def requests(self) -> int:
        """nginx's count of the requests it has read (stub_status), this one included."""
        return self._status()[2]

    def active(self) -> int:
        """nginx's count of the client connections open now (stub_status), this one included."""
        return self._status()[0]

    def _status(self) -> tuple[int, int, int]:
        """(active connections, accepted connections, requests read) from stub_status."""
        with urllib.request.urlopen(self.url + "__nginx_requests", timeout=5) as resp:
            lines = resp.read().decode().splitlines()
        # "Active connections: N", then " accepts handled requests" under "server accepts handled requests"
        counts = lines[2].split()
        return int(lines[0].split(":")[1]), int(counts[0]), int(counts[2])

    def _wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url, timeout=1) as resp:
                    if resp.status == 200:
                        return True
            except OSError:
                time.sleep(0.05)
        return False

    def _stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            # nginx's master stops its worker on SIGQUIT/SIGTERM; the group kill is the backstop.
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.proc = None

    def __exit__(self, *exc: object) -> None:
        self._stop()
        shutil.rmtree(self.dir, ignore_errors=True)
