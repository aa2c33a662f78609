"""A check's pattern means one thing everywhere: `knee doctor` (Python's re), the engine (Rust's regex) and the docs
read expect_stdout, expect_stderr, expect_body_regex and tcp `expect` line by line, as grep does (`^` and `$` at
every line's ends), and a mismatch shows the text it was held against with its newlines escaped."""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import REPO, knee_cli
from servers import Nginx


def run(tmp_path: Path, *args: str) -> dict:
    """`knee run -q --json FILE ARGS`: the JSON document."""
    out = tmp_path / f"r{time.monotonic_ns()}.json"
    proc = knee_cli("run", "-q", "--json", str(out), *args, timeout=60)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(out.read_text())


def doctor(*args: str) -> tuple[int, list[str]]:
    """`knee doctor --json ARGS`: its exit status and what it said about the command."""
    proc = knee_cli("doctor", "--json", *args, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, [f["text"] for f in json.loads(proc.stdout)["findings"] if f["check"] == "command"]


def samples(doc: dict) -> list[str]:
    return [r["sample"] for r in doc["reasons"]]


def test_a_command_s_output_is_matched_line_by_line_in_run_and_doctor(tmp_path: Path) -> None:
    # `psql -Atc 'select 1'` writes "1\n": `^1$` matches it as grep would, in the run and in the doctor alike
    for command in (["echo", "1"], ["printf", "1\\n"], ["printf", "0\\n1\\n2\\n"]):
        assert run(tmp_path, "-n", "3", "--expect-stdout", "^1$", "--", *command)["succeeded"] == 3, command
        assert doctor("--expect-stdout", "^1$", "--", *command) == (0, []), command
    doc = run(tmp_path, "-n", "2", "--expect-stderr", "^b$", "--", "sh", "-c", "printf 'a\\nb\\n' >&2")
    assert doc["succeeded"] == 2
    # `\A…\z` is still the whole text
    doc = run(tmp_path, "-n", "2", "--expect-stdout", r"\A1\z", "--", "echo", "1")
    assert doc["failures"] == {"stdout": 2}


def test_a_mismatch_shows_the_output_with_its_newlines_escaped(tmp_path: Path) -> None:
    doc = run(tmp_path, "-n", "2", "--expect-stdout", "^2$", "--", "printf", "1\\n")
    assert doc["failures"] == {"stdout": 2}
    assert samples(doc) == ['stdout of printf does not match expect_stdout: "1\\n"']
    code, said = doctor("--expect-stdout", "^2$", "--", "printf", "1\\n")
    assert code == 1
    (text,) = said
    assert "its stdout does not match expect_stdout '^2$' (it wrote \"1\\n\")" in text, text
    doc = run(tmp_path, "-n", "1", "--expect-stdout", "x", "--", "true")
    assert samples(doc) == ['stdout of true does not match expect_stdout: ""']


def test_a_response_body_is_matched_line_by_line(nginx: Nginx, tmp_path: Path) -> None:
    # nginx answers "hello from nginx\n"
    doc = run(tmp_path, "-n", "3", "--expect-body-regex", "^hello from nginx$", nginx.url + "/")
    assert doc["succeeded"] == 3
    doc = run(tmp_path, "-n", "2", "--expect-body-regex", "^hello$", nginx.url + "/")
    assert doc["failures"] == {"body": 2}
    assert samples(doc) == ['body does not match expect_body_regex: "hello from nginx\\n"']


def test_what_a_tcp_service_sends_is_matched_line_by_line(nginx: Nginx, tmp_path: Path) -> None:
    tcp = f"tcp://127.0.0.1:{nginx.port}"
    send = ("--send", "GET / HTTP/1.0\\r\\n\\r\\n")
    doc = run(tmp_path, "-n", "3", *send, "--expect", "^hello from nginx$", tcp)
    assert doc["succeeded"] == 3
    doc = run(tmp_path, "-n", "1", *send, "--expect", "^bye$", tcp)
    (sample,) = samples(doc)
    assert 'without a match for expect: "HTTP/1.1 200 OK\\r\\nServer: nginx' in sample, sample


def test_the_docs_say_so() -> None:
    for name in ("scenarios.md", "doctor.md", "engine-spec.md"):
        assert "line by line, as grep does" in " ".join((REPO / "docs" / name).read_text().split()), name
