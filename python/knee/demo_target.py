"""The demo target's launcher: start `knee target` (the demo service, `crates/demo-target`) as its own
process and talk to it.

    with start_target("srm-fast", pool=20) as t:
        ...  # drive t.url with knee; t.stats() is the server's own count

`start_target` spawns `python -m knee target ... --ready-file F`, waits (bounded) until the
server has written its addresses to F, and stops it with SIGTERM (then SIGKILL) by PID.
Keyword overrides are target config keys (see docs/demo-target.md); `lam` stands for `lambda`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from knee.errors import UserError
from knee.scenario.tomlout import to_toml

# Config keys whose value is a table.
_TABLES = ("recovery", "tcp", "login", "paths")


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, table by table (neither is changed)."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def parse_path_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """`/copy=cost:2,bytes:10485760` → ("/copy", {"cost": 2.0, "bytes": 10485760}); `session:true` too."""
    path, sep, rest = spec.partition("=")
    if not sep or not path.startswith("/"):
        raise UserError(f"--path {spec!r} is not PATH=KEY:VALUE,...; write e.g. --path /copy=cost:2,bytes:10485760")
    entry: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition(":")
        try:
            if key == "cost":
                entry["cost"] = float(value)
            elif key == "bytes":
                entry["bytes"] = int(value)
            elif key == "session" and value in ("true", "false"):
                entry["session"] = value == "true"
            else:
                raise ValueError
        except ValueError:
            raise UserError(
                f"--path {spec!r}: {item!r} is not cost:NUMBER, bytes:INTEGER or session:true|false; "
                "write e.g. --path /copy=cost:2,bytes:1024"
            ) from None
    return path, entry


def overrides_to_table(overrides: dict[str, Any]) -> dict[str, Any]:
    """Python keyword overrides as config keys (`lam` → `lambda`), None values dropped."""
    out: dict[str, Any] = {}
    for k, v in overrides.items():
        if v is None:
            continue
        out["lambda" if k == "lam" else k] = v
    return out


class TargetProcess:
    """A `knee target` running as its own process."""

    def __init__(self, proc: subprocess.Popen[bytes], ready: dict[str, Any], workdir: tempfile.TemporaryDirectory[str]):
        self.proc = proc
        self.ready = ready
        self._workdir = workdir
        self.host: str = ready["host"]
        self.http_port: int = int(ready["http_port"])
        self.tcp_port: int = int(ready["tcp_port"])

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:41234 (no trailing slash)."""
        return self.ready["url"]

    @property
    def tcp_addr(self) -> str:
        return f"{self.host}:{self.tcp_port}"

    @property
    def model(self) -> dict[str, Any]:
        """What the configured curve predicts (`/admin/config`'s model): n_star, peak_clients, peak_rate,
        plateau_rate (the rate from `workers` clients on; None without workers), single_client_ms."""
        return dict(self.ready.get("model", {}))

    def _call(self, method: str, path: str, timeout_s: float = 5.0) -> dict[str, Any]:
        req = urllib.request.Request(self.url + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            doc: dict[str, Any] = json.loads(resp.read())
            return doc

    def stats(self) -> dict[str, Any]:
        """The server's own counts (GET /admin/stats)."""
        return self._call("GET", "/admin/stats")

    def config(self) -> dict[str, Any]:
        """The effective config and its model (GET /admin/config)."""
        return self._call("GET", "/admin/config")

    def reset(self) -> dict[str, Any]:
        """POST /admin/reset: back to normal, totals zeroed; returns the stats from before."""
        return self._call("POST", "/admin/reset")

    def stop(self, timeout_s: float = 5.0) -> int:
        """SIGTERM, then SIGKILL after `timeout_s`; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout_s)
        self._workdir.cleanup()
        return int(self.proc.returncode)

    def __enter__(self) -> TargetProcess:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_target(
    profile: str | None = None,
    *,
    ready_timeout_s: float = 20.0,
    extra_args: list[str] | None = None,
    wrap: list[str] | None = None,
    **overrides: Any,
) -> TargetProcess:
    """Start `knee target` as its own process and wait until it listens.

    `overrides` are config keys (`pool=20`, `recovery={"mode": "stuck"}`, `lam=50.0` for lambda;
    `login={"path": "/login"}, paths={"/files/x": {"session": True}}` for login sessions).
    `wrap` is a command that execs it (`["ip", "netns", "exec", NS]`: it runs inside a network namespace,
    with the same pid). Raises UserError (with the target's own one-line message) if it does not start.
    """
    workdir = tempfile.TemporaryDirectory(prefix="knee-target-")
    ready_file = Path(workdir.name) / "ready.json"
    log = Path(workdir.name) / "target.log"
    argv = [*(wrap or []), sys.executable, "-m", "knee", "target", "--ready-file", str(ready_file), "--quiet"]
    if profile is not None:
        argv += ["--profile", profile]
    table = overrides_to_table(overrides)
    if table:
        cfg = Path(workdir.name) / "config.toml"
        cfg.write_text(to_toml(table))
        argv += ["--config", str(cfg)]
    argv += extra_args or []
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline:
        if ready_file.exists():
            try:
                ready = json.loads(ready_file.read_text())
            except json.JSONDecodeError:
                ready = None
            if ready is not None:
                return TargetProcess(proc, ready, workdir)
        if proc.poll() is not None:
            message = log.read_text(errors="replace").strip().splitlines()
            workdir.cleanup()
            why = message[-1] if message else f"exit code {proc.returncode}"
            raise UserError(f"knee target did not start: {why.removeprefix('knee: error: ')}")
        time.sleep(0.02)
    proc.kill()
    proc.wait(5)
    workdir.cleanup()
    raise UserError(
        f"knee target did not start within {ready_timeout_s:g} s; raise ready_timeout_s or check the machine's load"
    )
