"""knee as a user installs it: `make wheel`'s wheel, pip-installed into a fresh venv on a PATH without cargo or rustc.
It runs `knee demo`, a sweep whose counts are nginx's and the Python API; one version (the workspace's Cargo.toml) is
in the wheel's name, `knee --version`, run.json and the report; `auditwheel show` names its manylinux policy. The venv
has knee's runtime dependencies only (no dev extras: no hdrh, no pytest), and the reports need nothing more."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest

from knee.executor.ship import driver_build
from knee.store import RunDir

from conftest import REPO, SYSTEM_PATH, clean_env, make_venv
from servers import Nginx, sent, settled

# One xdist worker for the wheel's tests (and test_ship.py's): the wheel is built once, each venv made once.
pytestmark = pytest.mark.xdist_group("wheel")

VERSION = tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]["package"]["version"]


@pytest.fixture(scope="module")
def user_bin(knee_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the wheel pip-installed (its dependencies from PyPI): its bin directory."""
    return make_venv(tmp_path_factory.mktemp("wheel-user") / "venv", str(knee_wheel))


def user(bin_dir: Path, *args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """A command of that venv, run as its user would: the venv's bin and the system's on PATH, from `cwd`."""
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=clean_env(bin_dir),
        stdin=subprocess.DEVNULL,
    )


def test_the_wheel_is_named_and_tagged_by_the_workspace_version(knee_wheel: Path) -> None:
    assert re.fullmatch(rf"knee-{re.escape(VERSION)}-cp311-abi3-manylinux_2_\d+_x86_64\.whl", knee_wheel.name)
    names = zipfile.ZipFile(knee_wheel).namelist()
    assert "knee/_engine.abi3.so" in names  # the engine and the demo service (`knee target`, `knee demo`)
    assert "knee/commands/demo.py" in names and "knee/demo_target.py" in names


def test_it_installs_and_runs_where_there_is_no_rust(user_bin: Path, tmp_path: Path) -> None:
    assert shutil.which("cargo", path=str(user_bin) + ":" + SYSTEM_PATH) is None
    assert shutil.which("rustc", path=str(user_bin) + ":" + SYSTEM_PATH) is None
    where = user(user_bin, "python", "-c", "import knee._engine as e; print(e.__file__)", cwd=tmp_path)
    assert where.stdout.startswith(str(user_bin.parent)), where.stdout + where.stderr  # the wheel's, not the checkout
    version = user(user_bin, "knee", "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == f"knee, version {VERSION}", version


def test_knee_demo_runs_from_the_wheel(user_bin: Path, tmp_path: Path) -> None:
    proc = user(user_bin, "knee", "demo", "--quick", "--out", str(tmp_path / "runs"), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert json.loads((run_dir / "run.json").read_text())["knee_version"] == VERSION
    figures = re.findall(r"<svg\b.*?</svg>", (run_dir / "report.html").read_text(), re.S)
    (dist,) = [f for f in figures if "Latency distribution per level" in f]
    assert dist.count("<path") > 5, "the distribution curve is drawn from the engine's percentiles (no hdrh here)"


def test_the_venv_has_the_runtime_dependencies_only(user_bin: Path, tmp_path: Path) -> None:
    """What the reports above were drawn with: pyproject's [project] dependencies, not the dev extras."""
    code = "import importlib.util as u; print([m for m in ('hdrh', 'pytest', 'jsonschema') if u.find_spec(m)])"
    proc = user(user_bin, "python", "-c", code, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_a_sweep_from_the_wheel_counts_what_nginx_logged(user_bin: Path, nginx: Nginx, tmp_path: Path) -> None:
    nginx.clear_log()
    out = tmp_path / "runs"
    proc = user(
        user_bin, "knee", "sweep", nginx.url + "/", "--levels", "2,5", "--iterations", "40", "--no-recovery",
        "--settle", "0", "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = out.iterdir()
    record = RunDir(run_dir).load()
    assert record.knee_version == VERSION
    main = [step.groups["main"] for step in record.steps]
    assert [(g.succeeded, g.failed, g.hung, g.abandoned) for g in main] == [(80, 0, 0, 0), (200, 0, 0, 0)]
    assert settled(lambda: len(nginx.access_lines()), sent(record)) == sent(record) == 280 + record.probes
    assert f"knee {VERSION}" in (run_dir / "report.html").read_text()  # the report's (and live page's) meta line


def test_the_python_api_runs_from_the_wheel(user_bin: Path, nginx: Nginx, tmp_path: Path) -> None:
    url = nginx.url + "/"
    code = f"import knee; r = knee.run({url!r}, clients=2, n=100); print(r.stats.succeeded, knee.__version__)"
    proc = user(user_bin, "python", "-c", code, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.split() == ["100", VERSION], proc.stdout + proc.stderr


def test_an_installed_knee_packs_its_own_wheel_for_ship(user_bin: Path, knee_wheel: Path, tmp_path: Path) -> None:
    """--ship from a knee installed from a wheel (no checkout): that installation, packed again as its wheel, the
    same build as the checkout's (the build is the Python files', wherever they are installed)."""
    code = "from knee.executor.ship import Shipper; s = Shipper(True); print(s.wheel); print(s.build)"
    proc = user(user_bin, "python", "-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    path, build = proc.stdout.split()
    assert build == driver_build()
    packed = Path(path)
    assert packed.name == knee_wheel.name
    with zipfile.ZipFile(packed) as z, zipfile.ZipFile(knee_wheel) as original:
        assert sorted(z.namelist()) == sorted(original.namelist())
        assert z.read("knee/_engine.abi3.so") == original.read("knee/_engine.abi3.so")


def test_auditwheel_names_a_manylinux_policy(knee_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    tools = make_venv(tmp_path_factory.mktemp("auditwheel") / "venv", "auditwheel")
    proc = subprocess.run([str(tools / "auditwheel"), "show", str(knee_wheel)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert re.search(r'consistent with the following platform tag: "manylinux_2_\d+_x86_64"', said), said
    tag = re.search(r"manylinux_2_\d+_x86_64", knee_wheel.name)
    assert tag and f'"{tag.group()}"' in said  # the wheel's own tag is the policy auditwheel names
