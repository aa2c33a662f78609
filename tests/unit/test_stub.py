"""The .pyi stub of the Rust extension must describe what the extension really exports."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_engine_stub_matches_the_extension() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "knee._engine", "--ignore-disjoint-bases"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_version_is_the_installed_packages() -> None:
    from importlib.metadata import version

    import knee

    assert knee.__version__ == version("knee") != "0.0.0"
