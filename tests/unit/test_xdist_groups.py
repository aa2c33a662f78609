"""make test-py's parallel pass relies on `--dist loadgroup`: the tests of one `xdist_group` run on one worker, so a
module's expensive fixture (a venv with the wheel, bench/run.py --smoke) is made once, and the tests that share a
port (8787, the slurm group) never run at once. pytest 9.2 made pytest-xdist 3.8 ignore the groups without a word
(pytest-dev/pytest-xdist#1386): each test of a group went to another worker and made its fixture again
(pyproject.toml pins pytest below 9.2 for it). This holds the pinned pair to it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

GROUPED = textwrap.dedent(
    """
    import os
    import pytest

    pytestmark = pytest.mark.xdist_group("g")

    @pytest.fixture(scope="module")
    def made(tmp_path_factory):
        with open(os.environ["SETUPS"], "a") as f:
            f.write(f"{os.getpid()}\\n")

    @pytest.mark.parametrize("i", range(6))
    def test_grouped(made, i):
        pass
    """
)

SPREAD = textwrap.dedent(
    """
    import pytest

    @pytest.mark.parametrize("i", range(12))
    def test_spread(i):
        pass
    """
)


def test_a_groups_tests_run_on_one_worker_and_its_module_fixture_is_made_once(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_spread.py").write_text(SPREAD)
    setups = tmp_path / "setups"
    args = ["-q", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadgroup", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env={"SETUPS": str(setups), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "18 passed" in done.stdout
    # Without the groups, the six tests spread over the three workers and each worker made the fixture.
    assert len(setups.read_text().splitlines()) == 1, done.stdout
