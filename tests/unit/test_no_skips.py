"""`make test` fails on a skip it does not allow (tests/no_skips.py): pytest run on tests of this test's own."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from _pytest.mark.expression import Expression

from conftest import REPO

CONFTEST = "from no_skips import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n"
SOME = """
import pytest


def test_runs() -> None:
    assert True


def test_needs_a_tool() -> None:
    pytest.skip("frobnicate is not installed")


def test_may_skip_in_ci() -> None:
    pytest.skip("the machine decides")


@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug() -> None:
    raise AssertionError
"""
MODULE = 'import pytest\n\npytest.importorskip("knee_no_such_module_for_the_test")\n'


def pytest_on(tmp_path: Path, file: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_some.py").write_text(SOME)
    (tmp_path / "test_module.py").write_text(MODULE)
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "KNEE_NO_SKIPS", "KNEE_ALLOWED_SKIPS")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, file],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**clean, "PYTHONPATH": f"{REPO / 'tests'}{os.pathsep}{clean.get('PYTHONPATH', '')}", **env},
    )  # fmt: skip


def test_a_skip_fails_under_make_test_unless_the_makefile_names_it(tmp_path: Path) -> None:
    alone = pytest_on(tmp_path, ".")  # a developer's pytest: skips are skips
    assert alone.returncode == 0, alone.stdout
    assert "1 passed, 3 skipped, 1 xfailed" in alone.stdout, alone.stdout
    strict = pytest_on(tmp_path, "test_some.py", KNEE_NO_SKIPS="1", KNEE_ALLOWED_SKIPS="test_may_skip_in_ci")
    assert strict.returncode == 1, strict.stdout
    assert "test_needs_a_tool skipped under KNEE_NO_SKIPS/CI: frobnicate is not installed" in strict.stdout
    assert "add its name to KNEE_ALLOWED_SKIPS in the Makefile" in strict.stdout
    assert "1 failed, 1 passed, 1 skipped, 1 xfailed" in strict.stdout, strict.stdout
    ci = pytest_on(tmp_path, "test_some.py", CI="true")  # CI set: the same, and here nothing is allowed
    assert ci.returncode == 1 and "2 failed, 1 passed, 1 xfailed" in ci.stdout, ci.stdout
    module = pytest_on(tmp_path, "test_module.py", KNEE_NO_SKIPS="1")  # a module that skips as a whole
    assert module.returncode != 0, module.stdout
    assert "test_module.py skipped under KNEE_NO_SKIPS/CI: could not import" in module.stdout, module.stdout


def test_a_skip_fails_on_xdist_workers_too(tmp_path: Path) -> None:
    """make test-py runs most tests on pytest-xdist workers: the hooks run there, and their failures reach the
    summary as the tests' own."""
    strict = pytest_on(tmp_path, ".", "-n", "2", KNEE_NO_SKIPS="1", KNEE_ALLOWED_SKIPS="test_may_skip_in_ci")
    assert strict.returncode == 1, strict.stdout
    assert "test_needs_a_tool skipped under KNEE_NO_SKIPS/CI: frobnicate is not installed" in strict.stdout
    assert "test_module.py skipped under KNEE_NO_SKIPS/CI: could not import" in strict.stdout, strict.stdout
    assert "1 failed, 1 passed, 1 skipped, 1 xfailed, 1 error" in strict.stdout, strict.stdout


def test_make_test_runs_the_tests_with_no_skips() -> None:
    """test-py runs pytest only as $(PYTEST), which sets KNEE_NO_SKIPS, on all of tests/ in three passes whose markers
    select every test exactly once: "serial" on three workers, then "alone" one at a time, then the rest."""
    makefile = (REPO / "Makefile").read_text()
    (line,) = [x for x in makefile.splitlines() if "-m pytest" in x]
    assert line.startswith('PYTEST := KNEE_NO_SKIPS=1 KNEE_ALLOWED_SKIPS="$(KNEE_ALLOWED_SKIPS)" $(PY) -m pytest'), line
    rule = makefile.split("\ntest-py:", 1)[1].split("\n\n", 1)[0]
    recipe = " ".join(x.strip().removesuffix("\\") for x in rule.splitlines()[1:])
    passes = [part.strip() for part in recipe.split(";") if "$(PYTEST)" in part]
    # the serial pass starts its longest tests first (tests/conftest.py): an environment variable before $(PYTEST)
    assert passes[0].startswith("KNEE_LONGEST_FIRST=1 $(PYTEST) "), passes
    passes[0] = passes[0].removeprefix("KNEE_LONGEST_FIRST=1 ")
    assert len(passes) == 3 and all(p.startswith("$(PYTEST) ") and p.endswith(" tests") for p in passes), passes
    assert passes[1] == "$(PYTEST) -m alone tests" and " -n " not in passes[1], passes
    words = [shlex.split(p) for p in passes]
    selects = [Expression.compile(w[w.index("-m") + 1]) for w in words]
    for marks in ({"alone"}, {"alone", "serial"}, {"serial"}, set(), {"time_wait"}, {"serial", "time_wait"}):
        chosen = [i for i, e in enumerate(selects) if e.evaluate(lambda name, m=marks: name in m)]
        assert len(chosen) == 1, (marks, chosen, passes)
        assert chosen[0] == (1 if "alone" in marks else 0 if "serial" in marks else 2), (marks, passes)
