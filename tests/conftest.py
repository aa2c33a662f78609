"""Fixtures shared by every test: real servers on loopback, the knee command line."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from forkserver import Server

from no_skips import pytest_make_collect_report, pytest_runtest_makereport
from pki import Pki, make_pki
from servers import Nginx, TlsNginx, start_nginx, start_tls_nginx

if TYPE_CHECKING:
    from knee.model import RunRecord

# Under `make test` or in CI a skipped test fails, unless the Makefile's KNEE_ALLOWED_SKIPS names it (no_skips.py).
__all__ = ["pytest_make_collect_report", "pytest_runtest_makereport"]

REPO = Path(__file__).resolve().parent.parent


DURATIONS = Path(__file__).resolve().parent / "durations.tsv"


def _durations() -> dict[str, float]:
    """The longest tests' seconds in a recent run (tests/durations.tsv, which scripts/test-durations.py writes)."""
    took: dict[str, float] = {}
    for line in DURATIONS.read_text().splitlines() if DURATIONS.is_file() else []:
        seconds, _, nodeid = line.partition("\t")
        if nodeid and not seconds.startswith("#"):
            took[nodeid] = float(seconds)
    return took


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected: the longest of the tests that run
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `time_wait` run last: the TIME_WAIT sockets of their connections hold ephemeral ports for a
    minute, and the verdicts of the tests that measure would name the load side (the ports held) for it.

    With KNEE_LONGEST_FIRST=1 (make test-py's serial pass), the modules with the longest tests first
    (tests/durations.tsv), each module's tests in their order (a module's fixtures are made once): xdist hands tests
    out in this order, and a long test handed out last kept that pass running on one worker for 25 s after the
    others had finished. Not in the parallel pass: it is CPU-bound, and its long tests mostly wait, so started
    together they left the cores idle at its start and its short CPU-bound tests crowded its end (7:03 in a fresh
    clone's CI run here, 6:36 the same day in the collection's order); nor in the alone pass, one test at a time."""
    took = _durations() if os.environ.get("KNEE_LONGEST_FIRST") == "1" else {}
    longest: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        longest[module] = max(longest.get(module, 0.0), took.get(item.nodeid.split("@")[0], 0.0))
    items.sort(
        key=lambda item: (item.get_closest_marker("time_wait") is not None, -longest[item.nodeid.split("::")[0]])
    )


@pytest.fixture(scope="session")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    server = start_nginx(tmp_path_factory.mktemp("nginx"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, certificates and keys made with openssl (tests/pki.py)."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def tls_nginx(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsNginx]:
    """nginx with TLS (client certificates of `pki` required) and HTTP/2 listeners (tests/servers.py)."""
    server = start_tls_nginx(tmp_path_factory.mktemp("tls-nginx"), pki.dir)
    yield server
    server.stop()


_fork_server: Server | None = None


def _forking() -> Server | None:
    """This process's fork server (tests/forkserver.py), started again if it has died; None with KNEE_TESTS_FORK=0."""
    global _fork_server
    if os.environ.get("KNEE_TESTS_FORK", "1") != "1":
        return None
    if _fork_server is None or _fork_server.proc.poll() is not None:
        _fork_server = Server()
    return _fork_server


@pytest.fixture(scope="session", autouse=True)
def fork_server() -> None:
    """Started with the session, not inside the first test that runs a command: a test that counts this process's
    children or descriptors around its first command would see the server appear."""
    _forking()


def knee_cli(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None, cwd: object = None, **kw: object
) -> subprocess.CompletedProcess[str]:
    """Run `knee ARGS` as its own process and capture its output: forked from a process that imported knee already
    (tests/forkserver.py says why and what differs), or `python -m knee` with KNEE_TESTS_FORK=0, other keyword
    arguments, or an environment whose variables that shape an interpreter's start (PYTHON*, LANG, LC_*, TZ)
    differ from the server's."""
    server = _forking() if not kw else None
    if server is not None and server.serves(env):
        return server.run(list(args), timeout=timeout, env=env, cwd=cwd)
    return subprocess.run(
        [sys.executable, "-m", "knee", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=cwd,  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def knee_record(out: Path, *args: str, command: str = "run") -> RunRecord:
    """`knee COMMAND ARGS --out OUT`, which must succeed, and the run directory it kept there, read back."""
    from knee.store import RunDir

    proc = knee_cli(command, *args, "--out", str(out), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return RunDir(run_dir).load()


@pytest.fixture
def knee() -> object:
    return knee_cli


# A PATH for the installed wheel's commands: the venv's, then the system's; no cargo or rustc (~/.cargo/bin).
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@contextlib.contextmanager
def dist_held() -> Iterator[None]:
    """dist/'s wheel left alone while held: `knee_wheel` rebuilds it (emptying dist/ first) on other pytest workers
    under the same lock, and `--ship` without a wheel reads it from the checkout."""
    with open(REPO / ".wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def knee_wheel() -> Path:
    """dist/knee-VERSION-…whl as `make wheel` builds it: once a session, with make install's interpreter and profile,
    so that after make install it only packs what cargo built (a few seconds; minutes when the engine changed)."""
    # make wheel empties dist/ first: one pytest worker at a time builds, and each keeps its own copy
    with open(REPO / ".wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run(["make", "-s", "wheel"], cwd=REPO, capture_output=True, text=True, timeout=1800)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (built,) = (REPO / "dist").glob("knee-*.whl")
        mine = Path(tempfile.mkdtemp(prefix="knee-wheel-")) / built.name
        shutil.copy2(built, mine)
    return mine


def make_venv(where: Path, *packages: str) -> Path:
    """A fresh venv at `where` with `packages` pip-installed (from PyPI, or files); its bin directory. No byte-code is
    compiled at install (`--no-compile`; what runs compiles on import): that was a third of the CPU of installing
    knee's wheel and its dependencies (22.4 → 14.3 CPU-s here), mostly for modules the tests never import."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    if packages:
        python = str(where / "bin" / "python")
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile", *packages],
            check=True,
            timeout=900,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PATH": SYSTEM_PATH, "PIP_NO_WARN_SCRIPT_LOCATION": "1"},
        )
    return where / "bin"


def clean_env(bin_dir: Path) -> dict[str, str]:
    """The environment of a user who installed knee into that venv, on a machine without Rust."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    return {**env, "PATH": f"{bin_dir}:{SYSTEM_PATH}"}
