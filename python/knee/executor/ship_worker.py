"""What runs on a Dask worker before knee is there (`--ship`, docs/distributed.md): which knee the worker has, and
installing the driver's wheel into the worker's Python. Standard library only, and sent by value
(`cloudpickle.register_pickle_by_value`, `knee.executor.ship`): a worker without knee, or with another knee, runs
these without importing any of it."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import tempfile
from typing import Any

PIP_TIMEOUT_S = 900.0  # pip resolving knee's dependencies from an index, on a slow link


def sources(package: str) -> list[str]:
    """A knee package's Python files and stubs (regular files; byte code left out), relative to it, in order."""
    found = []
    for root, dirs, names in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for n in names:
            path = os.path.join(root, n)
            if n.endswith((".py", ".pyi")) and os.path.isfile(path):  # not an editor's dangling lock link
                found.append(os.path.relpath(path, package).replace(os.sep, "/"))
    return sorted(found)


def build_of(package: str) -> str:
    """A knee package's build, as its Python files and stubs say it (their paths and bytes): two installations of
    one version made from different trees differ in it (the engine's live and result shapes are mirrored in them),
    the same wheel installed anywhere does not. The compiled engine is left out: builds of one tree on two machines
    need not be byte for byte the same (so a change to the engine alone is not seen)."""
    return digest((name, _read(os.path.join(package, name))) for name in sources(package))


def digest(files: Any) -> str:
    """The build of (path relative to the package, bytes) pairs, in order of path."""
    h = hashlib.sha256()
    for name, data in files:
        h.update(name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()[:12]


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def probe() -> dict[str, Any]:
    """The knee installed in this Python (None: none) and its build; the knee this process has loaded (None: not
    loaded) and, once it ran a shard, that knee's build (another build installed over it since is not the code it
    runs); where this Python's environment is (one install serves every worker sharing it)."""
    try:
        installed: str | None = importlib.metadata.version("knee")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    spec = importlib.util.find_spec("knee") if installed is not None else None
    where = list(spec.submodule_search_locations or []) if spec is not None else []
    if not where:  # its files are not on this sys.path
        installed = None
    engine = sys.modules.get("knee._engine")
    loaded = getattr(engine, "__version__", None) if engine is not None else None
    tasks = sys.modules.get("knee.executor.dask_tasks")  # imported by the shards this process ran
    loaded_build = getattr(tasks, "LOADED_BUILD", None) if loaded is not None else None
    return {
        "installed": installed,
        "build": build_of(where[0]) if installed is not None else None,
        "loaded": loaded,
        "loaded_build": loaded_build,
        "prefix": sys.prefix,
        "python": sys.executable,
    }


async def install(wheel: bytes, name: str, replace: bool = False) -> str:
    """pip-install the wheel `wheel` (file name `name`) into this worker's Python, with the dependencies it lacks
    (from the index pip is configured with); `replace`: over a knee of the same version (another build), in its
    place, then what it needs that the other did not. Returns "" when it is installed, else the end of what pip
    said. Awaited on the worker's event loop, so that the worker keeps answering the scheduler while pip runs."""
    with tempfile.TemporaryDirectory(prefix="knee-ship-") as tmp:
        path = os.path.join(tmp, os.path.basename(name))
        with open(path, "wb") as f:
            f.write(wheel)
        # pip keeps a knee of the same version ("already satisfied"): put this one in its place first
        said = await _pip(path, "--force-reinstall", "--no-deps") if replace else ""
        said = said or await _pip(path)
    importlib.invalidate_caches()  # knee's new files are found by the next import
    return said


async def _pip(*args: str) -> str:
    """`pip install -q ARGS` in this worker's Python: "" when it succeeded, else the end of what pip said."""
    # --no-compile: what the worker imports compiles then; pip's compiling of every module of knee's dependencies
    # was a third of an install's CPU (tests/conftest.py make_venv measured 22.4 → 14.3 CPU-s)
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-compile"]
    env = {**os.environ, "PIP_NO_WARN_SCRIPT_LOCATION": "1"}
    proc = await asyncio.create_subprocess_exec(
        *command,
        "-q",
        *args,
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
    if proc.returncode != 0:
        lines = [line.strip() for line in out.decode(errors="replace").splitlines() if line.strip()]
        said = [line for line in lines if line.startswith("ERROR")] or lines
        return said[-1] if said else f"pip exited with {proc.returncode}"
    return ""
