"""Importers against real tools' output (issue 36, item 4): what knee replays of a recording reaches nginx as the
recording's own requests did.

- A HAR of the Network events headless Chromium emitted while loading pages from nginx (tests/har.py says why the
  HAR is made from them): imported and run, nginx logs each recorded request again (method, URI, Content-Type,
  Cookie, body); no cookie value is written in the scenario.
- `knee import curl` of a command with -H, -d, -u and -b: nginx logs the same line for knee as for curl itself.
- vegeta's targets files, http and json: `vegeta attack` itself (installed as bench/install.sh installs it) and
  knee (`--targets`, and `knee import targets`) reach nginx with the same requests.

nginx logs method, URI, the headers involved and $request_body (read by proxying /api/ to a second server), one
line per request. Scenarios of several requests are request mixes ([[groups.NAME.requests]]).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from har import har_of
from knee.importers.har import is_asset

from browser import Browser
from conftest import REPO, knee_cli
from servers import NGINX_HEAD, free_ports, popen_nginx, stop_process, wait_for_port

CONF = (
    NGINX_HEAD
    + """\
    log_format replay escape=json
        '$request_method $request_uri|$http_content_type|$http_authorization|$http_cookie|$http_x_trace|$request_body';
    access_log {dir}/replay.log replay;
    log_format agents escape=json '$http_user_agent|$http_accept';
    access_log {dir}/agents.log agents;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        root {dir}/site;
        location /api/ {{ proxy_pass http://127.0.0.1:{sink}/; }}
    }}
    server {{
        listen 127.0.0.1:{sink};
        access_log off;
        location / {{ default_type application/json; return 200 '{{"ok": true}}'; }}
    }}
}}
"""
)
# a 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
FILES = {
    "page.html": '<!DOCTYPE html><html><head><title>page</title><link rel="stylesheet" href="style.css">'
    '<link rel="icon" href="data:,"></head><body><img src="logo.png"><script src="page.js"></script></body></html>',
    "app.html": '<!DOCTYPE html><html><head><title>app</title><link rel="icon" href="data:,"></head>'
    '<body><img src="logo.png"><script src="app.js"></script></body></html>',
    "style.css": "body { color: #333; }",
    "page.js": "window.done = true;",
    "app.js": """(async () => {
  await fetch('/api/items?page=1', {headers: {'X-Trace': 'items'}});
  await fetch('/api/save', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Trace': 'save'},
                            body: JSON.stringify({name: 'widget', qty: 3})});
  window.done = true;
})();""",
}
SESSION = "s3ss10n-value-4711"


@dataclass
class Site:
    dir: Path
    url: str
    proc: subprocess.Popen[bytes]

    def lines(self, want: int = 0, log: str = "replay.log") -> list[str]:
        """The log's lines, once there are `want` of them (at most 5 s): nginx writes a request's line after its
        response, so a client may be done before its line is."""
        deadline = time.monotonic() + 5
        while len(lines := (self.dir / log).read_text().splitlines()) < want and time.monotonic() < deadline:
            time.sleep(0.02)
        return lines

    def clear(self) -> None:
        (self.dir / "replay.log").write_text("")
        (self.dir / "agents.log").write_text("")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    d = tmp_path_factory.mktemp("import-nginx")
    (d / "site").mkdir()
    for name, text in FILES.items():
        (d / "site" / name).write_text(text)
    (d / "site" / "logo.png").write_bytes(PNG)
    port, sink = free_ports(2)
    (d / "nginx.conf").write_text(CONF.format(dir=d, port=port, sink=sink))
    proc = popen_nginx(d / "nginx.conf", d)
    wait_for_port(port)
    wait_for_port(sink)
    yield Site(d, f"http://127.0.0.1:{port}", proc)
    stop_process(proc)


@dataclass
class Recording:
    har: Path
    lines: list[str]  # nginx's lines of the recorded requests that are not static assets


@pytest.fixture(scope="module")
def recordings(site: Site, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recording]:
    """Headless Chromium loads page.html (a document and its assets) and app.html (its script calls the API),
    with a session cookie; each page's Network events become a HAR."""
    out = tmp_path_factory.mktemp("har")
    browser = Browser(timeout_s=60)
    recorded: dict[str, Recording] = {}
    try:
        browser.page.call("Network.setCookie", name="session", value=SESSION, url=site.url)
        for page in ("page", "app"):
            site.clear()
            browser.page.events = []
            browser.open(f"{site.url}/{page}.html")
            browser.wait("window.done === true")
            doc = har_of(browser.page.events)
            path = out / f"{page}.har"
            path.write_text(json.dumps(doc, indent=1))
            wanted = {
                f"{e['request']['method']} {e['request']['url'].removeprefix(site.url)}"
                for e in doc["log"]["entries"]
                if not is_asset(e) and e["request"]["url"].startswith(site.url)
            }
            recorded[page] = Recording(path, [ln for ln in site.lines() if ln.split("|", 1)[0] in wanted])
    finally:
        browser.close()
    return recorded


def knee_ok(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    proc = knee_cli(*args, env={**os.environ, **(env or {})}, cwd=cwd, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_har_of_a_page_chromium_loaded_replays_its_request(
    site: Site, recordings: dict[str, Recording], tmp_path: Path
) -> None:
    rec = recordings["page"]
    assert rec.lines == [f"GET /page.html|||session={SESSION}||"], rec.lines  # the document; its assets left out
    out = tmp_path / "page.toml"
    proc = knee_ok("import", "har", str(rec.har), "-o", str(out))
    assert "left out 3 static assets" in proc.stderr and "main_cookie_session: the cookie 'session'" in proc.stderr
    text = out.read_text()
    assert SESSION not in text
    table = tomllib.loads(text)
    assert table["secrets"] == ["main_cookie_session"] and table["vars"] == {"target": site.url}
    assert table["groups"]["main"]["url"] == "${target}/page.html"
    site.clear()
    knee_ok("run", str(out), "-c", "2", "-n", "20", "-q", env={"main_cookie_session": SESSION})
    assert site.lines(len(rec.lines) * 20) == rec.lines * 20
    with_assets = tmp_path / "assets.toml"
    knee_ok("import", "har", str(rec.har), "-o", str(with_assets), "--include-assets")
    names = [r["name"] for r in tomllib.loads(with_assets.read_text())["groups"]["main"]["requests"]]
    assert names == ["get_page", "get_style", "get_logo", "get_page_2"], names
    assert SESSION not in with_assets.read_text()


def test_har_with_api_calls_replays_each_request(site: Site, recordings: dict[str, Recording], tmp_path: Path) -> None:
    rec = recordings["app"]
    assert sorted(rec.lines) == sorted([
        f"GET /app.html|||session={SESSION}||",
        f"GET /api/items?page=1|||session={SESSION}|items|",
        'POST /api/save|application/json||session=' + SESSION + '|save|{\\"name\\":\\"widget\\",\\"qty\\":3}',
    ]), rec.lines  # fmt: skip
    out = tmp_path / "app.toml"
    knee_ok("import", "har", str(rec.har), "-o", str(out))
    assert SESSION not in out.read_text()
    site.clear()
    knee_ok("run", str(out), "-c", "2", "-n", "300", "-q", env={"main_cookie_session": SESSION})
    seen = site.lines(300)
    assert len(seen) == 300 and set(seen) == set(rec.lines)


def test_curl_import_sends_what_curl_sends(site: Site, tmp_path: Path) -> None:
    url = f"{site.url}/api/login?next=%2Fhome"
    args = ["-s", "-o", "/dev/null", "-H", "X-Trace: t-42", "-d", "user=alice", "-d", "n=1", "-u", "alice:pa55"]
    args += ["-b", "sid=xyz987; theme=dark", url]
    site.clear()
    subprocess.run(["curl", *args], check=True, timeout=30)
    (curls,) = site.lines(1)
    (agent,) = site.lines(1, "agents.log")  # curl's own User-Agent and Accept (a WAF refuses requests without them)
    assert agent.startswith("curl/") and agent.endswith("|*/*"), agent
    auth = "Basic " + base64.b64encode(b"alice:pa55").decode()
    form = "application/x-www-form-urlencoded"
    assert curls == f"POST /api/login?next=%2Fhome|{form}|{auth}|sid=xyz987; theme=dark|t-42|user=alice&n=1"
    out = tmp_path / "curl.toml"
    proc = knee_ok("import", "curl", "-o", str(out), "--", "curl", *args)
    for name in ("main_header_authorization", "main_cookie_sid", "main_cookie_theme"):
        assert name in proc.stderr
    text = out.read_text()
    assert "xyz987" not in text and auth.split()[1] not in text and "pa55" not in text
    site.clear()
    secrets = {"main_header_authorization": auth, "main_cookie_sid": "xyz987", "main_cookie_theme": "dark"}
    knee_ok("run", str(out), "-c", "2", "-n", "10", "-q", env=secrets)
    assert site.lines(10) == [curls] * 10
    assert site.lines(10, "agents.log") == [agent] * 10


def vegeta() -> str:
    """vegeta, installed as bench/install.sh installs it (`make bench` does) when it is not there yet."""
    found = shutil.which("vegeta") or str(REPO / "bench" / "tools" / "bin" / "vegeta")
    if not os.access(found, os.X_OK):
        proc = subprocess.run(
            ["bash", str(REPO / "bench" / "install.sh"), "vegeta"], capture_output=True, text=True, timeout=900
        )
        assert os.access(found, os.X_OK), f"bench/install.sh vegeta could not install vegeta:\n{proc.stderr[-2000:]}"
    return found


def targets_files(base: str, d: Path, targets: list[dict[str, Any]]) -> tuple[Path, Path]:
    """The same targets in vegeta's http format (body in a file beside it) and json format."""
    http_lines, json_lines = [], []
    for i, t in enumerate(targets):
        http_lines.append(f"{t['method']} {base}{t['path']}")
        http_lines += [f"{k}: {v}" for k, v in t.get("headers", {}).items()]
        doc: dict[str, Any] = {"method": t["method"], "url": f"{base}{t['path']}"}
        doc["header"] = {k: [v] for k, v in t.get("headers", {}).items()}
        if "body" in t:
            (d / f"body{i}.json").write_bytes(t["body"])
            http_lines.append(f"@body{i}.json")
            doc["body"] = base64.b64encode(t["body"]).decode()
        http_lines.append("")
        json_lines.append(json.dumps(doc))
    (d / "targets.txt").write_text("\n".join(http_lines))
    (d / "targets.jsonl").write_text("\n".join(json_lines) + "\n")
    return d / "targets.txt", d / "targets.jsonl"


def vegeta_attack(site: Site, path: Path, fmt: str, n: int, cwd: Path) -> Counter[str]:
    """The lines nginx logged for vegeta's `n` requests (`n`/s for 1 s). vegeta's pacer stops at the duration's end
    even when it fell behind, so on a busy machine it may send fewer (one target 19 times, not 20): such a run is
    made again, at most three times."""
    sent = 0
    for _ in range(3):
        site.clear()
        attack = subprocess.run(
            [vegeta(), "attack", "-targets", str(path), "-format", fmt, "-rate", f"{n}/1s", "-duration", "1s"],
            capture_output=True,
            cwd=cwd,
            timeout=60,
            check=True,
        )
        results = subprocess.run(
            [vegeta(), "encode", "-to", "csv"], input=attack.stdout, capture_output=True, timeout=60, check=True
        )
        sent = len(results.stdout.splitlines())
        if sent == n:
            return Counter(site.lines(n))
    raise AssertionError(f"vegeta sent {sent} of its {n} requests in each of three runs")


def attack(site: Site, files: tuple[Path, Path], n: int, cwd: Path) -> dict[str, Counter[str]]:
    """The lines nginx logged, each with how many times, for vegeta on each file, for knee --targets on each, and for
    the scenario `knee import targets` wrote of the http one."""
    seen: dict[str, Counter[str]] = {}
    for path, fmt in zip(files, ("http", "json"), strict=True):
        seen[f"vegeta {fmt}"] = vegeta_attack(site, path, fmt, n, cwd)
        site.clear()
        knee_ok("run", "--targets", str(path), "--targets-format", fmt, "-c", "2", "-n", str(n), "-q", cwd=cwd)
        seen[f"knee --targets {fmt}"] = Counter(site.lines(n))
    out = cwd / "imported.toml"
    knee_ok("import", "targets", str(files[0]), "-o", str(out), cwd=cwd)
    site.clear()
    # the importer wrote the recorded cookie as a secret placeholder: its value comes from the environment
    knee_ok("run", str(out), "-c", "2", "-n", str(n), "-q", cwd=cwd, env={"main_cookie_sid": "v42"})
    seen["knee import targets"] = Counter(site.lines(n))
    return seen


@pytest.mark.xdist_group("vegeta")  # one worker: where vegeta is not built yet, one build
def test_vegeta_target_reaches_nginx_as_vegetas(site: Site, tmp_path: Path) -> None:
    """One target (a plain group): a POST with headers and a body file."""
    body = b'{"order": 7, "note": "fast"}'
    files = targets_files(site.url, tmp_path, [
        {"method": "POST", "path": "/api/orders?src=v", "headers": {"Content-Type": "application/json",
                                                                     "X-Trace": "v-1"}, "body": body},
    ])  # fmt: skip
    seen = attack(site, files, 10, tmp_path)
    want = Counter({'POST /api/orders?src=v|application/json|||v-1|{\\"order\\": 7, \\"note\\": \\"fast\\"}': 10})
    assert seen == dict.fromkeys(seen, want)


@pytest.mark.xdist_group("vegeta")  # one worker: where vegeta is not built yet, one build
def test_vegeta_targets_reach_nginx_as_vegetas(site: Site, tmp_path: Path) -> None:
    """Three targets (a request mix): vegeta sends each in turn, and so does knee (mix_order = "in_turn"): 60
    requests are 20 of each, where at random by weight they would not be."""
    files = targets_files(site.url, tmp_path, [
        {"method": "GET", "path": "/api/items?page=2", "headers": {"X-Trace": "v-items"}},
        {"method": "POST", "path": "/api/save", "headers": {"Content-Type": "application/json", "X-Trace": "v-save"},
         "body": b'{"name": "bolt"}'},
        {"method": "PUT", "path": "/api/put", "headers": {"Content-Type": "text/plain", "Cookie": "sid=v42"},
         "body": b"plain text"},
    ])  # fmt: skip
    seen = attack(site, files, 60, tmp_path)
    want = Counter({
        "GET /api/items?page=2||||v-items|": 20,
        'POST /api/save|application/json|||v-save|{\\"name\\": \\"bolt\\"}': 20,
        "PUT /api/put|text/plain||sid=v42||plain text": 20,
    })  # fmt: skip
    assert seen == dict.fromkeys(seen, want)


def test_bad_input_is_one_sentence(tmp_path: Path) -> None:
    """As its own process: a missing file, a HAR that is not JSON, an unknown curl flag, a malformed targets line."""
    not_json = tmp_path / "page.har"
    not_json.write_text("<html></html>")
    bad_targets = tmp_path / "targets.txt"
    bad_targets.write_text("GET http://127.0.0.1:8080/\nX-Trace 1\n")
    for args, said in (
        (["import", "har", str(tmp_path / "missing.har")], "cannot read HAR"),
        (["import", "har", str(not_json)], "is not a HAR file: it is not JSON (line 1, column 1"),
        (["import", "curl", "--", "curl", "--tcp-fastopen", "http://h/"], "curl --tcp-fastopen: knee import does not"),
        (["import", "targets", str(bad_targets)], "targets.txt line 2: 'X-Trace 1' is neither a header"),
        (["run", "--targets", str(bad_targets), "-n", "1"], "targets.txt line 2: 'X-Trace 1' is neither a header"),
        (["run", str(tmp_path / "missing.toml"), "-c", "2"], "cannot read scenario"),
    ):
        proc = knee_cli(*args, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""
        (line,) = proc.stderr.splitlines()
        assert line.startswith("knee: error: ") and said in line, line
