"""knee as a user installs it: its runtime dependencies only, no dev extras (no hdrh, no pytest). The
reports, the latency-distribution plot included, must not need anything more."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import knee

from conftest import REPO
from servers import Nginx

# One xdist worker for the module's tests: its fixture (a venv of the runtime dependencies) runs once.
pytestmark = pytest.mark.xdist_group("plain-install")


@pytest.fixture(scope="module")
def plain_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with knee's runtime dependencies (pyproject's [project] dependencies) and knee's sources."""
    venv = tmp_path_factory.mktemp("plain") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *deps],
        check=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # knee itself as the editable install has it: the sources and the built engine in python/knee
    (Path(site) / "knee-src.pth").write_text(str(REPO / "python") + "\n")
    return py


def test_reports_render_without_dev_extras(plain_python: Path, nginx: Nginx, tmp_path: Path) -> None:
    missing = subprocess.run(
        [str(plain_python), "-c", "import importlib.util as u; print([m for m in ('hdrh', 'pytest', 'jsonschema') "
         "if u.find_spec(m)])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert missing == "[]", "the plain venv must not have the dev extras"
    r = knee.run(nginx.url + "/", clients=2, n=400, out=tmp_path)
    assert r.run_dir is not None
    (r.run_dir / "report.html").unlink()
    proc = subprocess.run(
        [str(plain_python), "-m", "knee", "report", str(r.run_dir)],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    html = (r.run_dir / "report.html").read_text()
    dist = re.findall(r"<svg\b.*?</svg>", html, re.S)[-1]
    assert "Latency distribution per level" in dist
    assert dist.count("<path") > 5, "the distribution curve is drawn from the engine's percentiles"
