"""Traffic like production (issue 36): data sources and request mixes, held against what nginx logged.

nginx's access log names each request's method and path (tests/servers.py `counted`): a queue of ids must reach it
each exactly once, a 9:1 mix's per-name counts in run.json must equal nginx's per-path counts, and the same seed
must send the same sequence again.
"""

from __future__ import annotations

import json
import math
import socketserver
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from datafiles import ids_csv, mix_scenario

from conftest import knee_cli
from servers import NGINX_HEAD, Nginx, nginx_with


def _ids(tmp: Path, n: int) -> Path:
    return ids_csv(tmp / "ids.csv", n)


def _record(out: Path) -> dict[str, Any]:
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return json.loads((run / "run.json").read_text())


def _requests(nginx: Nginx) -> list[tuple[str, str, str]]:
    """(method, path, status) of every request nginx answered since its log was cleared."""
    return [(f[1], f[2], f[3]) for f in (line.split() for line in nginx.access_lines())]


def test_a_queue_reaches_nginx_each_row_exactly_once(nginx: Nginx, tmp_path: Path) -> None:
    ids = _ids(tmp_path, 5000)
    nginx.clear_log()
    r = knee_cli(
        "run", f"{nginx.url}/u/${{ids.id}}", "--data", f"ids={ids}", "--data-order", "queue",
        "-c", "20", "-n", "5000", "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    seen = [path for method, path, status in _requests(nginx) if method == "GET" and status == "200"]
    assert sorted(seen) == sorted(f"/u/{i}" for i in range(5000))  # each id once: none twice, none missing
    step = _record(tmp_path / "runs")["steps"][0]
    assert step["groups"]["main"]["succeeded"] == len(_requests(nginx)) == 5000
    (use,) = step["data"]
    assert (use["name"], use["rows"], use["taken"], use["used"]) == ("ids", 5000, 5000, 5000)


def test_a_sweep_whose_queue_runs_out_uses_disjoint_rows_and_says_so(nginx: Nginx, tmp_path: Path) -> None:
    ids = _ids(tmp_path, 150)
    nginx.clear_log()
    r = knee_cli(
        "sweep", f"{nginx.url}/u/${{ids.id}}", "--data", f"ids={ids}", "--data-order", "queue",
        "--levels", "2,4", "-n", "100", "--no-recovery", "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    assert r.returncode in (0, 3), r.stderr
    steps = _record(tmp_path / "runs")["steps"]
    assert [s["groups"]["main"]["succeeded"] for s in steps] == [100, 50]
    assert [s["data"][0]["used"] for s in steps] == [100, 50]
    # the second step took the 50 rows the first left, and ran out of them
    assert [s["groups"]["main"]["ran_out"] for s in steps] == [None, "ids"]
    assert steps[1]["data"][0]["exhausted_after_s"] is not None
    seen = [path for method, path, _ in _requests(nginx) if method == "GET"]
    assert sorted(seen) == sorted(f"/u/{i}" for i in range(150))  # no probe, no row twice
    assert steps[1]["spec"]["data"][0]["ranges"] == [[100, 2**63 - 1]]


def test_an_open_loop_whose_queue_runs_out_started_or_dropped_every_arrival(nginx: Nginx, tmp_path: Path) -> None:
    """The arrival a client took when the queue had run out (and those taken after the group was told to stop) went
    back to the queue and were dropped with it: offered = started + dropped, where one a client took went missing."""
    ids = _ids(tmp_path, 150)
    nginx.clear_log()
    out = tmp_path / "run.json"
    r = knee_cli(
        "run", f"{nginx.url}/u/${{ids.id}}", "--data", f"ids={ids}", "--data-order", "queue",
        "--rate", "300", "-c", "8", "-d", "2s", "--json", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["started"] == doc["succeeded"] == len(_requests(nginx)) == 150, doc
    o = doc["open_loop"]
    assert doc["started"] + o["dropped"] == o["offered"], doc


def _mix(tmp: Path, url: str, seed: int) -> Path:
    """A 9:1 mix: `read` GETs /read, `write` sends a new uuid to /write."""
    path = tmp / f"mix-{seed}.toml"
    write = {"name": "write", "url": "/write?at=${now_ms}", "body": '{"id": "${uuid}"}'}
    path.write_text(mix_scenario(f"{url}/read", {"name": "read", "weight": 9}, write, seed=seed))
    return path


def test_a_9_to_1_mix_is_counted_per_request_as_nginx_counts_it(nginx: Nginx, tmp_path: Path) -> None:
    nginx.clear_log()
    r = knee_cli("run", str(_mix(tmp_path, nginx.url, 42)), "-c", "8", "-n", "20000", "--out", str(tmp_path / "runs"))
    assert r.returncode == 0, r.stderr
    logged = Counter((method, path) for method, path, _ in _requests(nginx))
    assert set(logged) == {("GET", "/read"), ("POST", "/write")}
    requests = _record(tmp_path / "runs")["steps"][0]["groups"]["main"]["requests"]
    assert list(requests) == ["read", "write"]
    assert requests["read"]["succeeded"] == logged[("GET", "/read")]
    assert requests["write"]["succeeded"] == logged[("POST", "/write")]
    n, writes = 20000, logged[("POST", "/write")]
    assert sum(logged.values()) == n
    sigma = math.sqrt(n * 0.1 * 0.9)
    assert abs(writes - n * 0.1) <= 3 * sigma, writes


def test_the_same_seed_sends_the_same_sequence(nginx: Nginx, tmp_path: Path) -> None:
    def sequence(seed: int) -> list[str]:
        nginx.clear_log()
        r = knee_cli("run", str(_mix(tmp_path, nginx.url, seed)), "-c", "1", "-n", "300")
        assert r.returncode == 0, r.stderr
        return [method for method, _, _ in _requests(nginx)]

    first = sequence(7)
    assert 0 < first.count("POST") < 300
    assert sequence(7) == first
    assert sequence(8) != first


def test_bad_data_and_mixes_are_one_sentence_before_any_load(nginx: Nginx, tmp_path: Path) -> None:
    ids = _ids(tmp_path, 3)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("id,name\n1,a\n2\n")
    zero = tmp_path / "zero.toml"
    zero.write_text(_mix(tmp_path, nginx.url, 1).read_text().replace("weight = 9", "weight = 0"))
    cases = {
        "No such file or directory); fix the path": [
            "run", f"{nginx.url}/u/${{ids.id}}", "--data", f"ids={tmp_path}/nope.csv",
        ],
        "line 3 has 1 fields but the header has 2": [
            "run", f"{nginx.url}/u/${{ids.id}}", "--data", f"ids={ragged}", "-n", "5",
        ],
        "names no column of ids": ["run", f"{nginx.url}/u/${{ids.nme}}", "--data", f"ids={ids}"],
        "names no data source 'people'": ["run", f"{nginx.url}/u/${{people.id}}", "--data", f"ids={ids}"],
        "--data-order must be one of circular, queue, random, shuffle (got 'sideways')": [
            "run", f"{nginx.url}/", "--data", f"ids={ids}", "--data-order", "sideways",
        ],
        "weight": ["run", str(zero), "-n", "5"],
        "needs two whole numbers LO <= HI": ["run", f"{nginx.url}/u/${{random_int(5)}}", "-n", "5"],
    }  # fmt: skip
    nginx.clear_log()
    for needle, args in cases.items():
        r = knee_cli(*args)
        assert r.returncode == 2, (needle, r.stdout, r.stderr)
        assert needle in r.stderr, (needle, r.stderr)
        assert "Traceback" not in r.stderr, r.stderr
    assert _requests(nginx) == []  # none of them sent a request


def test_a_value_a_url_cannot_carry_fails_as_request_naming_the_row(nginx: Nginx, tmp_path: Path) -> None:
    names = tmp_path / "names.csv"
    names.write_text("name\nann\nbob smith\ncy\n")
    nginx.clear_log()
    r = knee_cli(
        "run", f"{nginx.url}/u/${{n.name}}", "--data", f"n={names}", "--data-order", "queue", "-n", "3",
        "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    g = _record(tmp_path / "runs")["steps"][0]["groups"]["main"]
    assert (g["succeeded"], g["failures"]) == (2, {"request": 1}), r.stderr
    assert "row 2 of n" in g["reasons"][0]["sample"] and "a space" in g["reasons"][0]["sample"]
    assert sorted(p for _, p, _ in _requests(nginx)) == ["/u/ann", "/u/cy"]


def test_a_python_flow_gets_each_row_of_a_queue_in_ctx_data(nginx: Nginx, tmp_path: Path) -> None:
    ids = _ids(tmp_path, 400)
    nginx.clear_log()
    r = knee_cli(
        "run", "--python", "httpflows:by_row", "--path", str(Path(__file__).parent.parent / "flows"),
        "--var", f"url={nginx.url}", "--data", f"ids={ids}", "--data-order", "queue", "-c", "4", "-n", "400",
        "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    seen = [path for method, path, status in _requests(nginx) if method == "GET" and status == "200"]
    assert sorted(seen) == sorted(f"/u/{i}" for i in range(400))  # each row once, through the worker protocol
    step = _record(tmp_path / "runs")["steps"][0]
    assert step["groups"]["main"]["succeeded"] == 400 and step["data"][0]["used"] == 400


H2C_CONF = (
    NGINX_HEAD
    + """\
    log_format uri '$connection $request_method $request_uri $server_protocol $status';
    access_log {dir}/access.log uri;
    server {{
        listen 127.0.0.1:{port} http2;
        location / {{ default_type text/plain; return 200 "ok\\n"; }}
    }}
}}
"""
)


def test_a_templated_mix_over_http2_sends_each_row_on_shared_connections(tmp_path: Path) -> None:
    """Over HTTP/2 (h2c) a templated request is encoded per operation: nginx sees each queued id once, every
    request on HTTP/2.0, over the group's ⌈clients / streams⌉ connections, and each name's count."""
    with nginx_with(H2C_CONF, tmp_path) as port:
        ids = _ids(tmp_path, 600)
        scenario = tmp_path / "h2.toml"
        scenario.write_text(
            mix_scenario(
                f"http://127.0.0.1:{port}/u/${{ids.id}}",
                {"name": "get", "weight": 3},
                {"name": "post", "url": "/p/${ids.id}?n=${ids.name}", "body": '{"id": ${ids.id}}'},
                group={"http2": True, "streams": 4},
                seed=3,
                data=[{"name": "ids", "file": str(ids), "order": "queue"}],
            )
        )
        r = knee_cli("run", str(scenario), "-c", "8", "-n", "600", "--out", str(tmp_path / "runs"))
        assert r.returncode == 0, r.stderr
        lines = [line.split() for line in (tmp_path / "access.log").read_text().splitlines()]
    assert {(f[3], f[4]) for f in lines} == {("HTTP/2.0", "200")}
    assert len({f[0] for f in lines}) == 2  # 8 clients, 4 streams a connection
    ids_seen = sorted(int(f[2].split("/")[2].split("?")[0]) for f in lines)
    assert ids_seen == list(range(600))
    posts = [f for f in lines if f[1] == "POST"]
    assert all(f[2] == f"/p/{f[2].split('/')[2].split('?')[0]}?n=user{f[2].split('/')[2].split('?')[0]}" for f in posts)
    requests = _record(tmp_path / "runs")["steps"][0]["groups"]["main"]["requests"]
    assert requests["post"]["succeeded"] == len(posts) and requests["get"]["succeeded"] == 600 - len(posts)
    assert 0 < len(posts) < 300


def test_a_tcp_group_sends_and_expects_each_row(tmp_path: Path) -> None:
    """tcp `send` and `expect` templated: an echo server returns each line; the expected pattern holds the row's
    value matched literally (its "(" and "+" escaped), so every operation succeeds, and the server saw each row."""
    seen: list[str] = []

    class Echo(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            line = self.rfile.readline()
            seen.append(line.decode().strip())
            self.wfile.write(line)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    names = tmp_path / "names.csv"
    names.write_text("name\n" + "".join(f"user({i})+x\n" for i in range(50)))
    scenario = tmp_path / "tcp.toml"
    scenario.write_text(
        f"""[[data]]
name = "n"
file = "{names}"
order = "queue"
[groups.main]
kind = "tcp"
addr = "127.0.0.1:{server.server_address[1]}"
send = "HELLO ${{n.name}}\\n"
expect = "^HELLO ${{n.name}}$"
clients = "level"
"""
    )
    try:
        r = knee_cli("run", str(scenario), "-c", "4", "-n", "50", "--out", str(tmp_path / "runs"))
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr
    g = _record(tmp_path / "runs")["steps"][0]["groups"]["main"]
    assert (g["succeeded"], g["failed"]) == (50, 0), g["reasons"]
    sent = [line for line in seen if line]  # knee's preflight connects once and sends nothing
    assert sorted(sent) == sorted(f"HELLO user({i})+x" for i in range(50))
