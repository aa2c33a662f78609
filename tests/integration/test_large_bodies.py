"""Body checks on large bodies, from nginx over HTTP/1.1 and h2c: `expect_body` is searched as the body streams in,
so knee holds the substring's length of it, not the body (before, each client kept its whole body: 4 clients of a
64 MiB file peaked at 304 MiB over HTTP/1.1 and 285 over h2c, 48 now); `expect_body_regex` reads the body's first
16 MiB, and a failure there says so."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servers import NGINX_HEAD, Nginx, free_ports, popen_nginx, wait_for_port

BIG = 64 << 20  # the body, then MARK
MARK = b"THE-END"

CONF = (
    NGINX_HEAD
    + """\
    access_log off;
    server {{
        listen 127.0.0.1:{port};
        listen 127.0.0.1:{h2c} http2;
        location /files/ {{ alias {dir}/files/; }}
    }}
}}
"""
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """nginx serving files/big (64 MiB of zeros, then MARK: a sparse file) over HTTP/1.1 and h2c: the two URLs."""
    d = tmp_path_factory.mktemp("large-bodies")
    (d / "files").mkdir()
    with (d / "files" / "big").open("wb") as f:
        f.seek(BIG)
        f.write(MARK)
    port, h2c = free_ports(2)
    (d / "nginx.conf").write_text(CONF.format(dir=d, port=port, h2c=h2c))
    proc = popen_nginx(d / "nginx.conf", d)
    try:
        wait_for_port(port)
        wait_for_port(h2c)
        yield f"http://127.0.0.1:{port}/files/big", f"http://127.0.0.1:{h2c}/files/big"
    finally:
        Nginx(d, port, proc).stop()


def knee_run(tmp_path: Path, *args: str) -> tuple[dict[str, Any], int]:
    """`knee run -q --json` as a process of its own: the summary, and the process's peak resident set in MiB, read
    from its /proc status (VmHWM) while it runs: its exit's ru_maxrss would count pytest's too, the process it was
    started from."""
    out = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    argv = [sys.executable, "-m", "knee", "run", "-q", "--json", str(out), *args]
    peak = 0
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        status = Path(f"/proc/{proc.pid}/status")
        while proc.poll() is None:
            with contextlib.suppress(OSError, StopIteration):
                peak = max(peak, next(int(ln.split()[1]) for ln in status.open() if ln.startswith("VmHWM:")))
            time.sleep(0.01)
        said = proc.stdout.read().decode() if proc.stdout else ""
    assert proc.returncode == 0, said
    assert peak > 0, "VmHWM was never read"
    return json.loads(out.read_text()), round(peak / 1024)  # KiB


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "h2c"])
def test_a_substring_at_the_end_of_a_64_mib_body_is_found_in_the_substrings_memory(
    site: tuple[str, str], http2: bool, tmp_path: Path
) -> None:
    url = site[1] if http2 else site[0]
    h2 = ["--http2"] if http2 else []
    doc, rss = knee_run(tmp_path, url, *h2, "-c", "4", "-n", "8", "--expect-body", MARK.decode())
    assert doc["succeeded"] == 8 and doc["failed"] == 0, doc
    assert doc["payload_bytes"] == 8 * (BIG + len(MARK)), doc["payload_bytes"]
    assert rss < 100, f"knee's peak resident set {rss} MiB: it kept the bodies"
    doc, _ = knee_run(tmp_path, url, *h2, "-c", "2", "-n", "2", "--expect-body", "NOT-THERE")
    assert doc["failures"] == {"body": 2}, doc
    (said,) = doc["error_samples"]["body"]
    assert said.startswith('body does not contain expect_body: "\\0\\0'), said


def test_a_regex_reads_the_first_16_mib_and_says_so(site: tuple[str, str], tmp_path: Path) -> None:
    # found at the start: reads no further than it needs to hold
    doc, rss = knee_run(tmp_path, site[0], "-c", "2", "-n", "2", "--expect-body-regex", r"^\x00{1000}")
    assert doc["succeeded"] == 2, doc
    # past 16 MiB: not read, and the reason says how far it read; a match that needs the text's end is not taken at
    # the cut (the body goes on: zeros to 64 MiB, then MARK)
    for regex in (MARK.decode(), r"\A\x00*\z"):
        doc, _ = knee_run(tmp_path, site[0], "-c", "2", "-n", "2", "--expect-body-regex", regex)
        assert doc["failures"] == {"body": 2}, (regex, doc)
        (said,) = doc["error_samples"]["body"]
        assert said.startswith("body does not match expect_body_regex in its first 16 MiB, as far as a regex"), said
    assert rss < 100, f"knee's peak resident set {rss} MiB: 2 clients × 16 MiB and knee"
