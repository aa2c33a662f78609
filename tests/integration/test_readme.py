"""The README's `knee run` examples run as written (shortened), against knee's own demo service."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from knee.demo_target import start_target

from conftest import REPO, knee_cli

SHORTER = {"-d 30s": "-d 1s", "-d 5s": "-d 1s", "-n 20000": "-n 2000", "--iterations 100": "--iterations 5"}


def readme_run_examples() -> list[str]:
    text = (REPO / "README.md").read_text()
    return [line.split("#")[0].strip() for line in text.splitlines() if line.startswith("knee run ")]


def test_readme_knee_run_examples_work() -> None:
    examples = readme_run_examples()
    assert len(examples) >= 4
    with start_target("basic") as target:
        for example in examples:
            line = example.replace("http://127.0.0.1:8080", target.url)
            line = line.replace("tcp://127.0.0.1:9000", f"tcp://127.0.0.1:{target.tcp_port}")
            for long, short in SHORTER.items():
                line = line.replace(long, short)
            args = shlex.split(line)[2:]
            proc = knee_cli("run", "-q", *args, timeout=60)
            assert proc.returncode == 0, f"{example}\n{proc.stderr}"
            assert re.search(r"Failed:\s+0\b", proc.stdout), f"{example}\n{proc.stdout}"
            assert re.search(r"Hung \(timed out\):\s+0\b", proc.stdout), example


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
