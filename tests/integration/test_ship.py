"""`--ship`: a Dask cluster whose scheduler and two workers run from a venv with only dask[distributed] (no knee).
Without --ship the run stops before any load with one sentence that names --ship; with it, the driver's wheel
(`make wheel`'s) is pip-installed into the workers' venv (knee's dependencies from PyPI) and the sweep's counts are
nginx's."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import knee
from knee import __version__
from knee.errors import UserError
from knee.store import RunDir

from conftest import clean_env, dist_held, knee_cli, make_venv
from dask_cluster import Cluster, need, start_cluster
from servers import Nginx, sent, settled

need("distributed")

# With test_wheel.py on one xdist worker: the wheel is built once.
pytestmark = pytest.mark.xdist_group("wheel")


@pytest.fixture(scope="module")
def bare_cluster(knee_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    """A scheduler and two workers from a venv of dask[distributed] at the driver's version, without knee."""
    import dask
    import distributed

    tmp = tmp_path_factory.mktemp("ship")
    pins = [f"dask[distributed]=={dask.__version__}", f"distributed=={distributed.__version__}"]
    bin_dir = make_venv(tmp / "venv", *pins)
    cluster = start_cluster(tmp, 2, dask=str(bin_dir / "dask"))
    yield cluster, bin_dir
    cluster.stop()


def knee_in(bin_dir: Path) -> str:
    code = "import importlib.metadata as m\ntry: print(m.version('knee'))\nexcept m.PackageNotFoundError: print('none')"
    proc = subprocess.run([str(bin_dir / "python"), "-c", code], capture_output=True, text=True, env=clean_env(bin_dir))
    return proc.stdout.strip()


def errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines of knee's errors in what `proc` wrote to stderr (beside Dask's warnings)."""
    return [line for line in proc.stderr.splitlines() if line.startswith("knee: error:")]


@pytest.mark.timeout(900)  # pip installs from PyPI into the workers' venv, twice (the API's ship, then --ship)
def test_ship_installs_the_drivers_knee_on_workers_without_it(
    bare_cluster: tuple[Cluster, Path], nginx: Nginx, tmp_path: Path, knee_wheel: Path
) -> None:
    """(`knee_wheel`: dist/ holds the wheel; `dist_held` keeps other pytest workers from rebuilding it while the
    ships below read it, as a checkout's --ship does.)"""
    cluster, bin_dir = bare_cluster
    assert knee_in(bin_dir) == "none"
    sweep = ["sweep", nginx.url + "/", "--levels", "2,4", "--iterations", "25", "--no-recovery", "--settle", "0"]
    nginx.clear_log()

    # Without --ship: one sentence naming the worker and --ship, before any load.
    proc = knee_cli(*sweep, "--out", str(tmp_path / "refused"), "--cluster", cluster.address, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = errors(proc)  # (and Dask's warnings)
    assert len(said) == 1 and "has no knee" in said[0] and said[0].endswith("--ship"), proc.stderr
    assert "Traceback" not in proc.stderr
    # A wheel that is not this knee's: one sentence, before any load.
    other = tmp_path / "knee-0.0.1-cp311-abi3-manylinux_2_34_x86_64.whl"
    other.write_bytes(b"")
    proc = knee_cli(*sweep, "--out", str(tmp_path / "other"), "--cluster", cluster.address, "--ship-wheel", str(other))
    said = errors(proc)
    assert proc.returncode == 2 and len(said) == 1 and "not a wheel of knee" in said[0], proc.stderr
    assert nginx.access_lines() == []

    # The Python API's ship=True: the same wheel goes to the workers, and the sweep runs on both.
    import distributed

    with dist_held(), distributed.Client(cluster.address) as client:
        run = knee.sweep(
            nginx.url + "/", client=client, ship=True, out=str(tmp_path / "api"), levels=[2], iterations=25,
            no_recovery=True, settle="0",
        )  # fmt: skip
        assert knee_in(bin_dir) == __version__
        (step,) = run.record.steps
        assert step.groups["main"].succeeded == 50 and sorted(w.clients for w in step.workers) == [1, 1]
        assert settled(lambda: len(nginx.access_lines()), sent(run.record)) == sent(run.record)
    # uninstalled again (the workers' processes keep what they loaded): the command line's --ship installs it anew
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "uninstall", "-q", "-y", "knee"], check=True, timeout=120)
    assert knee_in(bin_dir) == "none"
    nginx.clear_log()

    # With --ship: the wheel goes to the workers' venv, and the sweep runs on both workers.
    out = tmp_path / "runs"
    with dist_held():
        proc = knee_cli(*sweep, "--out", str(out), "--cluster", cluster.address, "--ship", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert knee_in(bin_dir) == __version__
    (run_dir,) = out.iterdir()
    record = RunDir(run_dir).load()
    for step in record.steps:
        g = step.groups["main"]
        assert (g.succeeded, g.failed, g.hung, g.abandoned) == (step.level * 25, 0, 0, 0)
        assert sorted(w.clients for w in step.workers) == [step.level // 2] * 2  # both workers sent load
    assert settled(lambda: len(nginx.access_lines()), sent(record)) == sent(record) == 6 * 25 + record.probes

    # Another build of this version in the workers' venv (a wheel from another tree; here one of its files changed):
    # without --ship, one sentence naming --ship, before any load; with it the driver's wheel takes its place, and
    # the workers, whose processes ran this knee's build all along, run the sweep.
    where = [str(bin_dir / "python"), "-c", "import knee.fmt; print(knee.fmt.__file__)"]
    fmt = Path(subprocess.run(where, capture_output=True, text=True, env=clean_env(bin_dir), check=True).stdout.strip())
    with fmt.open("a") as f:
        f.write("# another tree\n")
    nginx.clear_log()
    proc = knee_cli(*sweep, "--out", str(tmp_path / "other-build"), "--cluster", cluster.address, timeout=120)
    said = errors(proc)
    assert proc.returncode == 2 and len(said) == 1, proc.stderr
    assert f"runs another build of knee {__version__}" in said[0] and said[0].endswith("--ship"), said
    assert nginx.access_lines() == []
    with dist_held():
        proc = knee_cli(*sweep, "--out", str(tmp_path / "again"), "--cluster", cluster.address, "--ship", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "# another tree" not in fmt.read_text() and knee_in(bin_dir) == __version__
    (run_dir,) = (tmp_path / "again").iterdir()
    again = RunDir(run_dir).load()
    assert [s.groups["main"].succeeded for s in again.steps] == [50, 100]


def test_ship_is_refused_without_a_cluster(nginx: Nginx, tmp_path: Path) -> None:
    proc = knee_cli("run", "-n", "10", nginx.url + "/", "--ship", "--out", str(tmp_path), timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--cluster" in proc.stderr, proc.stderr
    # the Python API's ship= alike, before any load
    nginx.clear_log()
    with pytest.raises(UserError, match=r"^ship=True installs knee on a cluster's workers: give client= \(a distrib"):
        knee.run(nginx.url + "/", n=10, ship=True)
    assert nginx.access_lines() == []
