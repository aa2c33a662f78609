"""What runs on a Dask worker before knee is there (`--ship`, docs/distributed.md): which knee the worker has, and
installing the driver's wheel into the worker's Python. Standard library only, and sent by value
(`cloudpickle.register_pickle_by_value`, `knee.executor.ship`): a worker without knee, or with another knee, runs
these without importing any of it."""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import tempfile
from typing import Any

PIP_TIMEOUT_S = 900.0  # pip resolving knee's dependencies from an index, on a slow link


def probe() -> dict[str, Any]:
    """The knee installed in this Python (None: none), the knee this process has loaded (None: not loaded), and
    where this Python's environment is (one install serves every worker sharing it)."""
    try:
        installed: str | None = importlib.metadata.version("knee")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed is not None and importlib.util.find_spec("knee") is None:  # its files are not on this sys.path
        installed = None
    engine = sys.modules.get("knee._engine")
    loaded = getattr(engine, "__version__", None) if engine is not None else None
    return {"installed": installed, "loaded": loaded, "prefix": sys.prefix, "python": sys.executable}


async def install(wheel: bytes, name: str) -> str:
    """pip-install the wheel `wheel` (file name `name`) into this worker's Python, with the dependencies it lacks
    (from the index pip is configured with). Returns "" when it is installed, else the end of what pip said.
    Awaited on the worker's event loop, so that the worker keeps answering the scheduler while pip runs."""
    with tempfile.TemporaryDirectory(prefix="knee-ship-") as tmp:
        path = os.path.join(tmp, os.path.basename(name))
        with open(path, "wb") as f:
            f.write(wheel)
        # --no-compile: what the worker imports compiles then; pip's compiling of every module of knee's dependencies
        # was a third of an install's CPU (tests/conftest.py make_venv measured 22.4 → 14.3 CPU-s)
        command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-compile"]
        command += ["-q", path]
        env = {**os.environ, "PIP_NO_WARN_SCRIPT_LOCATION": "1"}
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), PIP_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return f"pip did not finish within {PIP_TIMEOUT_S:.0f} s"
    importlib.invalidate_caches()  # knee's new files are found by the next import
    if proc.returncode != 0:
        lines = [line.strip() for line in out.decode(errors="replace").splitlines() if line.strip()]
        said = [line for line in lines if line.startswith("ERROR")] or lines
        return said[-1] if said else f"pip exited with {proc.returncode}"
    return ""
