"""--ship's parts that need no cluster: the driver's wheel found or refused in one sentence, the version check's
sentences, and the batch jobs' script that installs the wheel into a venv of each job's own (as dask-jobqueue writes
it). The Dask path is tests/integration/test_ship.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import knee
from knee import __version__
from knee.errors import UserError
from knee.executor.jobqueue import make_cluster
from knee.executor.ship import Shipper, checked_wheel, driver_build, driver_wheel, version_problem, wheel_build
from knee.executor.ship_worker import build_of
from knee.scenario.cluster import Cluster

from conftest import REPO
from servers import free_port


def test_a_wheel_given_must_exist_and_be_this_version(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file; build the wheel with make wheel"):
        driver_wheel(str(tmp_path / "knee.whl"))
    other = tmp_path / "knee-0.0.1-cp311-abi3-manylinux_2_34_x86_64.whl"
    other.write_bytes(b"")
    with pytest.raises(UserError, match=f"not a wheel of knee {__version__}, the knee running here"):
        driver_wheel(str(other))
    mine = tmp_path / f"knee-{__version__}-cp311-abi3-manylinux_2_34_x86_64.whl"
    mine.write_bytes(b"")
    assert driver_wheel(str(mine)) == mine


def test_in_a_checkout_the_wheel_is_dist_s_or_make_wheel_is_named() -> None:
    found = sorted((REPO / "dist").glob(f"knee-{__version__}-*.whl"))
    if found:
        assert driver_wheel(True) in found
    else:
        with pytest.raises(UserError, match="build it with make wheel, or give one with --ship-wheel FILE"):
            driver_wheel(True)


def test_each_version_problem_is_one_sentence_naming_the_fix() -> None:
    w = "tcp://10.0.0.7:40213 (10.0.0.7)"
    ok = {"installed": __version__, "loaded": None, "prefix": "/v", "python": "/v/bin/python"}
    assert version_problem(w, ok, __version__, shipped=False) is None
    assert version_problem(w, None, __version__, shipped=False) is None  # gone: the step names it
    none = {**ok, "installed": None}
    assert version_problem(w, none, __version__, shipped=False) == (
        f"Dask worker {w} has no knee: install knee {__version__} there (its wheel: docs/distributed.md), or let knee "
        "install its own: --ship"
    )
    old = {**ok, "installed": "0.0.9"}
    said = version_problem(w, old, __version__, shipped=False)
    assert said is not None and said.startswith(f"Dask worker {w} runs knee 0.0.9, this knee is {__version__}")
    assert said.endswith("--ship")
    loaded = {**ok, "loaded": "0.0.9"}  # installed now, but the process still has the old one
    said = version_problem(w, loaded, __version__, shipped=True)
    assert said is not None and "restart the worker" in said


def test_a_build_is_the_packages_python_files() -> None:
    """Two installations of one version from different trees differ in their build; byte code and the compiled
    engine do not count (builds of one tree on two machines need not be byte for byte the same)."""
    import shutil
    import tempfile

    package = Path(knee.__file__).parent
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "knee"
        shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
        assert build_of(str(copy)) == driver_build() == build_of(str(package))
        (copy / "__pycache__").mkdir(exist_ok=True)
        (copy / "__pycache__" / "fmt.cpython-311.pyc").write_bytes(b"other byte code")
        (copy / "_engine.abi3.so").write_bytes(b"another machine's build")
        assert build_of(str(copy)) == driver_build()
        with (copy / "fmt.py").open("a") as f:
            f.write("# another tree\n")
        assert build_of(str(copy)) != driver_build()


def this_wheel(where: Path) -> Path:
    """A wheel (in `where`) holding this knee's Python files and stubs: its build is this knee's."""
    import zipfile

    package = Path(knee.__file__).parent
    wheel = where / f"knee-{__version__}-cp311-abi3-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for f in sorted(package.rglob("*.py*")):
            if f.suffix in (".py", ".pyi") and "__pycache__" not in f.parts:
                z.write(f, "knee/" + f.relative_to(package).as_posix())
    return wheel


def test_a_wheel_of_another_build_is_refused_before_it_is_shipped(tmp_path: Path) -> None:
    """A wheel made before the tree changed (dist/'s, after an edit without make wheel) would make the workers
    another build than the driver: refused in one sentence naming a file that differs, before any job is asked for
    or any worker sent it; one holding this knee's files is taken."""
    import zipfile

    mine = this_wheel(tmp_path)
    assert wheel_build(mine) == build_of(str(Path(knee.__file__).parent)) and checked_wheel(str(mine)) == mine
    stale = tmp_path / "stale" / mine.name
    stale.parent.mkdir()
    with zipfile.ZipFile(mine) as old, zipfile.ZipFile(stale, "w") as z:
        for n in old.namelist():
            z.writestr(n, old.read(n) + (b"# an older tree\n" if n == "knee/fmt.py" else b""))
    said = f"--ship: {stale.name} is another build of knee {__version__} than the knee running here (its knee/fmt.py "
    for refuse in (Shipper, checked_wheel):
        with pytest.raises(UserError, match=re.escape(said)):
            refuse(str(stale))
    with pytest.raises(UserError, match=re.escape(said)):  # batch jobs: before any job is asked for
        make_cluster("slurm", Cluster(jobqueue="slurm", ship=str(stale), host="127.0.0.1"))
    broken = tmp_path / "broken" / mine.name
    broken.parent.mkdir()
    broken.write_bytes(b"not a zip")
    with pytest.raises(UserError, match="cannot be read as a wheel"):
        checked_wheel(str(broken))


def test_a_worker_process_is_stale_when_it_loaded_another_knee(tmp_path: Path) -> None:
    ship = Shipper(str(this_wheel(tmp_path)))
    same = {"installed": __version__, "build": ship.build, "loaded": __version__, "loaded_build": ship.build}
    assert not ship._stale(same) and not ship._stale({**same, "loaded": None}) and not ship._stale(None)
    assert ship._stale({**same, "loaded": "0.0.9"})
    assert ship._stale({**same, "loaded_build": "5e1f0c9d2b7a"})  # its shards ran another build
    # the files it has are another build; it loaded them (it ran no shard to say otherwise), or this one
    assert ship._stale({**same, "build": "5e1f0c9d2b7a", "loaded_build": None})
    assert not ship._stale({**same, "build": "5e1f0c9d2b7a"})


def test_another_build_of_this_version_is_one_sentence_naming_ship() -> None:
    w = "tcp://10.0.0.7:40213 (10.0.0.7)"
    ok = {"installed": __version__, "build": "a0fd7235117a", "loaded": None, "prefix": "/v", "python": "/v/bin/python"}
    assert version_problem(w, ok, __version__, shipped=False, build="a0fd7235117a") is None
    said = version_problem(w, ok, __version__, shipped=False, build="5e1f0c9d2b7a")
    assert said == (
        f"Dask worker {w} runs another build of knee {__version__} (its Python files differ from this knee's): "
        "install this knee's wheel on every worker, or let knee install its own there: --ship"
    )
    # the right build installed over the one the worker's process ran its shards with: it still runs that one
    said = version_problem(w, {**ok, "loaded": __version__, "loaded_build": "5e1f0c9d2b7a"}, __version__,
                           shipped=True, build="a0fd7235117a")  # fmt: skip
    assert said == (
        f"Dask worker {w} runs another build of knee {__version__}, loaded before this one was installed over it: "
        "restart the worker, then run knee again"
    )
    # another version is said as such, whatever its build
    said = version_problem(w, {**ok, "installed": "0.0.9"}, __version__, shipped=False, build="a0fd7235117a")
    assert said is not None and said.startswith(f"Dask worker {w} runs knee 0.0.9, this knee is {__version__}")


@pytest.mark.xdist_group("slurm")  # dask-jobqueue's scheduler takes port 8787 (tests/unit/test_jobqueue.py)
def test_a_shipping_job_runs_its_worker_from_a_venv_of_its_own_with_dask_and_names_no_driver_file(
    tmp_path: Path,
) -> None:
    """The job's script makes its venv with Dask alone; knee's wheel comes through Dask (a path of the driver's
    machine, as a knee installed from a wheel packs itself into its /tmp, is one no batch node sees)."""
    import distributed

    wheel = this_wheel(tmp_path)
    settings = Cluster(jobqueue="slurm", ship=str(wheel), prologue=["module load python"], host="127.0.0.1")
    cluster = make_cluster("slurm", settings.model_copy(update={"port": free_port()}))
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    lines = script.splitlines()
    start = lines.index("module load python")
    assert lines[start : start + 6] == [
        "module load python",
        "KNEE_VENV=`mktemp -d -t knee-job-XXXXXX`",
        "trap 'trap \"\" TERM; rm -rf $KNEE_VENV' EXIT",
        "python3 -m venv $KNEE_VENV",
        f"$KNEE_VENV/bin/python -m pip install -q --no-compile --disable-pip-version-check "
        f"distributed=={distributed.__version__}",
        "echo knee: this job runs its worker from $KNEE_VENV, where knee ships its own",
    ]
    assert lines[start + 6].startswith("$KNEE_VENV/bin/python -m distributed.cli.dask_worker tcp://127.0.0.1:")
    assert wheel.name not in script
