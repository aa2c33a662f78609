"""ctx.http, a Python flow's HTTP client (knee.flowhttp), against real servers: nginx logging each request's
connection and cookie, nginx with TLS and client certificates, and `knee target` with a login (the example);
ctx.data from the worker protocol's start and run lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knee.demo_target import TargetProcess
from knee.store import RunDir

from conftest import REPO, knee_cli
from pki import Pki
from servers import SESSION_PASSWORD as PASSWORD
from servers import Nginx, TlsNginx, free_port, nginx_conf, sent, session_target, settled, wait_for_port

FLOWS = REPO / "tests" / "flows"

# Each request's connection, method, URI, status and the Cookie it carried; /login sets a cookie naming the
# connection it was set on, so a cookie sent back on another connection would show.
CONF = nginx_conf(
    '$connection $request_method $request_uri $status "$http_cookie"',
    """\
    server {{
        listen 127.0.0.1:{port};
        default_type application/json;
        location = /login {{ add_header Set-Cookie "sid=c$connection; Path=/; HttpOnly"; return 200 '{{"ok":true}}'; }}
        location = /items {{ return 200 '{{"ok":true,"items":[1,2,3]}}'; }}
        location = /fail {{ default_type text/plain; return 500 "broken on purpose\\n"; }}
        location = /short {{ keepalive_timeout 300ms; return 200 '{{}}'; }}
        location / {{ return 200 '{{}}'; }}
    }}
""",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    tmp = tmp_path_factory.mktemp("flow-nginx")
    port = free_port()
    (tmp / "nginx.conf").write_text(CONF.format(dir=tmp, port=port))
    proc = subprocess.Popen(["nginx", "-c", str(tmp / "nginx.conf"), "-p", str(tmp)], stderr=subprocess.DEVNULL)
    wait_for_port(port)
    server = Nginx(dir=tmp, port=port, proc=proc)
    yield server
    server.stop()


def log(server: Nginx, count: int) -> list[list[str]]:
    """nginx's log lines since the last clear, once there are `count`: connection, method, URI, status, cookie."""
    assert settled(lambda: len(server.access_lines()), count) == count, server.access_lines()
    return [line.split(" ", 4) for line in server.access_lines()]


def run(tmp_path: Path, flow: str, *args: str, env: dict[str, str] | None = None) -> dict:
    out = tmp_path / f"r{time.monotonic_ns()}.json"
    proc = knee_cli("run", "-q", "--json", str(out), "--python", f"httpflows:{flow}", "--path", str(FLOWS), *args,
                    timeout=120, env=dict(os.environ, **(env or {})), cwd=REPO)  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(out.read_text())


def test_a_session_keeps_one_connection_and_its_cookie_per_client(server: Nginx, tmp_path: Path) -> None:
    server.clear_log()
    doc = run(tmp_path, "session", "-c", "4", "--iterations", "5", "--var", f"url={server.url}")
    assert (doc["succeeded"], doc["failed"], doc["hung"]) == (20, 0, 0), doc["reasons"]
    lines = log(server, 4 + 20)
    by_conn: dict[str, list[list[str]]] = {}
    for line in lines:
        by_conn.setdefault(line[0], []).append(line)
    # keep-alive: one connection per client, its login first, then its 5 fetches, each with the cookie set on it
    assert len(by_conn) == 4
    for conn, seen in by_conn.items():
        assert [(m, u, s) for _, m, u, s, _ in seen] == [("POST", "/login", "200")] + [("GET", "/items", "200")] * 5
        assert seen[0][4] == '"-"'
        assert {c for *_, c in seen[1:]} == {f'"sid=c{conn}"'}
    # each request a step, named by its method and path or by name=
    assert {k: v["count"] for k, v in doc["steps"].items()} == {"POST /login": 4, "items": 20}
    assert doc["payload_bytes"] == 20 * len('{"ok":true,"items":[1,2,3]}')


def test_a_status_outside_the_expected_is_a_status_failure(server: Nginx, tmp_path: Path) -> None:
    server.clear_log()
    doc = run(tmp_path, "get", "-c", "2", "--iterations", "3", "--var", f"url={server.url}", "--var", "path=/fail")
    assert (doc["succeeded"], doc["failed"]) == (0, 6)
    assert [line[1:4] for line in log(server, 6)] == [["GET", "/fail", "500"]] * 6
    (reason,) = doc["reasons"]
    # the flow's HTTP client names one of knee's classes: the failure is counted in it, not as the program's word
    assert reason["class"] == "status" and reason["count"] == 6 and doc["failures"] == {"status": 6}
    assert reason["key"].startswith("HTTP <n> Internal Server Error (GET /fail): broken on purpose"), reason
    assert doc["steps"]["GET /fail"]["count"] == 6  # a failed request is still timed
    # the flow may let a status through and judge it itself: the same class
    doc = run(tmp_path, "judged", "-c", "1", "--iterations", "2", "--var", f"url={server.url}")
    assert doc["failed"] == 2 and doc["reasons"][0]["key"].startswith("HTTP <n> Internal Server Error (fail)")
    assert doc["failures"] == {"status": 2}


def test_a_refused_connection_is_classed(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    doc = run(tmp_path, "get", "-c", "2", "--iterations", "2", "--var", f"url=http://127.0.0.1:{port}")
    assert (doc["succeeded"], doc["failed"]) == (0, 4)
    (reason,) = doc["reasons"]
    assert reason["class"] == "connect_refused" and doc["failures"] == {"connect_refused": 4}, reason
    assert reason["key"].startswith("GET /: connection refused by"), reason


def test_a_connection_the_server_closed_while_idle_is_replaced(server: Nginx, tmp_path: Path) -> None:
    server.clear_log()
    doc = run(tmp_path, "idle_between", "-c", "2", "--iterations", "1", "--var", f"url={server.url}")
    assert (doc["succeeded"], doc["failed"]) == (2, 0), doc["reasons"]
    lines = log(server, 4)
    assert len({line[0] for line in lines}) == 4  # nginx closed each after 0.3 s idle: a new one each time


def test_https_with_a_client_certificate(tls_nginx: TlsNginx, pki: Pki, tmp_path: Path) -> None:
    url = tls_nginx.url("tls").rstrip("/")
    trust = ["--var", f"tls_cacert={pki.path('root.pem')}"]
    cert = ["--var", f"tls_cert={pki.path('client-chain.pem')}", "--var", f"tls_key={pki.path('client.key')}"]
    tls_nginx.clear()
    doc = run(tmp_path, "get", "-c", "2", "--iterations", "5", "--var", f"url={url}", *trust, *cert)
    assert (doc["succeeded"], doc["failed"]) == (10, 0), doc["reasons"]
    lines = tls_nginx.lines("tls")
    assert len(lines) == 10 and all(f'200 "{pki.client_subject}" HTTP/1.1' in line for line in lines)
    assert len({line.split()[0] for line in lines}) == 2  # kept alive: a connection per client
    # no client certificate: nginx answers 400, a status failure
    doc = run(tmp_path, "get", "-c", "1", "--iterations", "2", "--var", f"url={url}", *trust)
    assert doc["failed"] == 2 and doc["reasons"][0]["key"].startswith("HTTP <n> Bad Request"), doc
    assert doc["failures"] == {"status": 2}
    # a server whose CA is not trusted: a tls failure, unless insecure
    doc = run(tmp_path, "get", "-c", "1", "--iterations", "2", "--var", f"url={url}", *cert)
    assert doc["failed"] == 2 and doc["reasons"][0]["key"].startswith("GET /: TLS handshake with"), doc
    assert doc["failures"] == {"tls": 2}
    doc = run(tmp_path, "get", "-c", "1", "--iterations", "2", "--var", f"url={url}", "--var", "insecure=true", *cert)
    assert (doc["succeeded"], doc["failed"]) == (2, 0), doc["reasons"]


def test_ctx_data_comes_from_the_start_and_run_lines() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "knee.pyworker", "httpflows:row_bytes", "--path", str(FLOWS)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    lines = [
        {
            "op": "start",
            "protocol": 1,
            "group": "g",
            "process": 0,
            "clients": [0, 1],
            "vars": {},
            "data": {"users": {"n": "7"}},
        },
        {"op": "run", "operation": "", "ops": [0, 0, 1, 0], "data": [{"users": {"n": "11"}}, None]},
        {"op": "run", "operation": "", "ops": [0, 1, 1, 1], "data": {"users": {"n": "12"}}},
        {"op": "run", "client": 0, "id": 2, "operation": "", "data": {"users": {"n": "13"}}},
        {"op": "run", "client": 1, "id": 2, "operation": ""},
        {"op": "stop"},
    ]
    out, err = proc.communicate("".join(json.dumps(x) + "\n" for x in lines).encode(), timeout=30)
    assert proc.returncode == 0, err
    replies = [json.loads(line) for line in out.splitlines()]
    assert replies[0] == {"ready": True, "batch": True}
    got = {(r["client"], r["id"]): r["bytes"] for r in replies[1:]}
    assert got == {(0, 0): 11, (1, 0): 7, (0, 1): 12, (1, 1): 12, (0, 2): 13, (1, 2): 7}


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    with session_target() as t:
        yield t


def test_the_login_then_use_example_sweeps(target: TargetProcess, tmp_path: Path) -> None:
    before = target.stats()
    out = tmp_path / "runs"
    example = str(REPO / "examples" / "python-flow-http.toml")
    proc = knee_cli("sweep", example, "--quick", "--out", str(out), "--var", f"target={target.url}",
                    "--secret", f"password={PASSWORD}", timeout=180, cwd=REPO)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    assert PASSWORD not in "".join(p.read_text() for p in run_dir.iterdir() if p.is_file())
    record = RunDir(run_dir).load()
    after = target.stats()
    # every operation one fetch with the session cookie, plus a login for a client without a session: none refused
    assert (after["requests"] - before["requests"]) - (after["logins"] - before["logins"]) == sent(record)
    assert after["unauthorized"] == before["unauthorized"] and after["logins_refused"] == before["logins_refused"]
    for s in record.steps:
        g = s.groups["users"]
        assert g.failed == g.hung == 0 and g.succeeded > 0
        assert "document" in g.steps and set(g.steps) <= {"POST /login", "document"}
