"""The README's `knee run` examples run as written (shortened), against knee's own demo service."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from knee.demo_target import start_target

from conftest import REPO, knee_cli
from grpcserver import start_grpc_server
from pki import Pki
from servers import TlsNginx
from wsserver import start_ws_server

SHORTER = {
    "-d 30s": "-d 1s",
    "-d 5s": "-d 1s",
    "-d 60s": "-d 1s",
    "-n 20000": "-n 2000",
    "--iterations 100": "--iterations 5",
    "--hold 30s": "--hold 300ms",
    "-c 5000": "-c 50",
}


def readme_run_examples(tls: bool = False) -> list[str]:
    """The README's `knee run` lines: those against the demo service, or (`tls`) those of its TLS section."""
    text = (REPO / "README.md").read_text()
    lines = [line.split("#")[0].strip() for line in text.splitlines() if line.startswith("knee run ")]
    return [line for line in lines if ("https://127.0.0.1:8443" in line) == tls]


def test_readme_knee_run_examples_work() -> None:
    examples = readme_run_examples()
    assert len(examples) >= 4
    # the WebSocket lines': an echo, and a server that pushes
    with start_ws_server() as ws, start_grpc_server() as grpc, start_target("basic") as target:
        for example in examples:
            line = example.replace("http://127.0.0.1:8080", target.url)
            line = line.replace("tcp://127.0.0.1:9000", f"tcp://127.0.0.1:{target.tcp_port}")
            line = line.replace("ws://127.0.0.1:8081/chat", ws.url("/echo")).replace(
                "ws://127.0.0.1:8081/feed", ws.url("/push")
            )
            line = line.replace("grpc://127.0.0.1:50051", f"grpc://127.0.0.1:{grpc.port}")
            line = line.replace(" examples/", f" {REPO}/examples/")
            for long, short in SHORTER.items():
                line = line.replace(long, short)
            args = shlex.split(line)[2:]
            proc = knee_cli("run", "-q", *args, timeout=60)
            assert proc.returncode == 0, f"{example}\n{proc.stderr}"
            assert re.search(r"Failed:\s+0\b", proc.stdout), f"{example}\n{proc.stdout}"
            assert re.search(r"Hung \(timed out\):\s+0\b", proc.stdout), example


def test_readme_tls_examples_work(tls_nginx: TlsNginx, pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    """The TLS section's examples, against nginx requiring client certificates of the test's PKI: its files stand
    for the README's, and a proxy-style file is $X509_USER_PROXY."""
    examples = readme_run_examples(tls=True)
    assert len(examples) >= 4
    files = {
        "usercert.pem": pki.path("client-chain.pem"),
        "userkey.pem": pki.path("client.key"),
        "ca.pem": pki.path("root.pem"),
        "/etc/grid-security/certificates": pki.path("certificates"),
    }
    monkeypatch.setenv("X509_USER_PROXY", pki.path("proxy.pem"))
    tls_nginx.clear()
    for example in examples:
        line = example.replace("https://127.0.0.1:8443/", tls_nginx.url("tls"))
        for name, path in files.items():
            line = line.replace(name, path)
        line = line.replace("-d 30s", "-d 0.5s")
        proc = knee_cli("run", "-q", *shlex.split(line)[2:], timeout=60)
        assert proc.returncode == 0, f"{example}\n{proc.stderr}"
        assert re.search(r"Failed:\s+0\b", proc.stdout), f"{example}\n{proc.stdout}"
        assert re.search(r"Succeeded:\s+[1-9]", proc.stdout), example
    assert all(pki.client_subject in ln for ln in tls_nginx.lines("tls"))


def test_readme_one_line_sweeps_work(tmp_path: Path) -> None:
    text = (REPO / "README.md").read_text()
    examples = [line.split("#")[0].strip() for line in text.splitlines() if line.startswith("knee sweep http")]
    assert len(examples) >= 2
    with start_target("basic") as target:
        for example in examples:
            line = example.replace("http://127.0.0.1:8080", target.url)
            line = re.sub(r"-d (?!auto)\S+", "-d 0.3s", line)
            line = re.sub(r"--levels (?!auto)\S+", "--levels 2,4", line)
            line = re.sub(r"--rates (?!auto)\S+", "--rates 50,100", line)
            line = re.sub(r"--max-level \S+", "--max-level 8", line)  # a searched sweep: a short search
            line = line.replace("-d auto", "-d auto --min-duration 1s --max-duration 2s --interval 0.2s")
            line = re.sub(r"--budget \S+", "--budget 20s", line)
            if "--rates auto" in line:
                line += " --start 50 --max-level 200"
            if " -d " not in line:  # the default duration is the real one: seconds per level here
                line += " -d 0.5s"
            if "--levels auto" in line and "--max-level" not in line:
                line += " --max-level 8"
            args = shlex.split(line)[2:]
            proc = knee_cli("sweep", *args, "--no-recovery", "--out", str(tmp_path), timeout=90)
            assert proc.returncode == 0, f"{example}\n{proc.stderr}"
            assert "report:" in proc.stdout, example
