"""`--ship` (`[cluster] ship`, docs/distributed.md): the driver's own knee, as a wheel, installed on the workers that
lack it or have another version or build, so that the workers need only Python and Dask.

The driver's wheel (`driver_wheel`): a file given (`--ship-wheel FILE`, `[cluster] ship = "FILE"`), of this knee's
version; else, in a checkout, the newest `dist/knee-VERSION-*.whl` (`make wheel`); else, knee installed from a
wheel, that installation packed again as its wheel (`repack`). On a Dask cluster (`Shipper`) each worker says which
knee its Python has installed and loaded (`ship_worker.probe`, sent by value: it needs no knee there); one worker per
Python environment installs the wheel with pip (`ship_worker.install`), and a worker that had another knee loaded is
restarted by its nanny. Batch jobs (`job_prologue`) run their worker from a venv of their own with Dask alone, and
get the wheel as any worker does.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.metadata
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from knee.errors import UserError

RESTART_TIMEOUT_S = 120.0
# Written by pip when it installs, not part of the wheel it installed.
_INSTALLER_FILES = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}


def by_value() -> ModuleType:
    """`knee.executor.ship_worker`, pickled by value from now on (a worker without knee can run its functions)."""
    import cloudpickle

    from knee.executor import ship_worker

    if ship_worker.__name__ not in cloudpickle.list_registry_pickle_by_value():
        cloudpickle.register_pickle_by_value(ship_worker)
    return ship_worker


def _version() -> str:
    from knee._engine import __version__

    return str(__version__)


def driver_wheel(ship: bool | str) -> Path:
    """The wheel of the knee running here: `ship` a path (checked to be this version's), else the checkout's
    `dist/`, else this installation packed again. One sentence with the fix when there is none."""
    version = _version()
    if isinstance(ship, str):
        path = Path(ship).expanduser()
        if not path.is_file():
            raise UserError(f"--ship-wheel {ship}: no such file; build the wheel with make wheel (into dist/)")
        if not (path.name.startswith(f"knee-{version}-") and path.suffix == ".whl"):
            raise UserError(
                f"--ship-wheel {path.name}: not a wheel of knee {version}, the knee running here; give that version's "
                "(make wheel builds it into dist/)"
            )
        return path.resolve()
    package = _package()
    checkout = package.parents[1]
    if (checkout / "Cargo.toml").is_file() and checkout / "python" / "knee" == package:
        found = sorted((checkout / "dist").glob(f"knee-{version}-*.whl"), key=lambda p: p.stat().st_mtime)
        if not found:
            raise UserError(
                f"--ship: no wheel of knee {version} in {checkout / 'dist'}: build it with make wheel, or give one "
                "with --ship-wheel FILE"
            )
        return found[-1]
    return repack()


@functools.cache
def repack() -> Path:
    """This knee's installation (from a wheel) packed again as that wheel, in a directory of its own: the files its
    RECORD lists under site-packages, with a RECORD of their own."""
    version = _version()
    dist = importlib.metadata.distribution("knee")
    files = [f for f in dist.files or [] if f.parts[0] != ".." and "__pycache__" not in f.parts]
    info = f"knee-{version}.dist-info"
    wheel_meta = (dist.read_text("WHEEL") or "").splitlines()
    tag = next((line.split(":", 1)[1].strip() for line in wheel_meta if line.startswith("Tag:")), None)
    if dist.version != version or tag is None or not any(f.parts[0] == "knee" for f in files):
        raise UserError(
            f"--ship: this knee {version} is not installed from a wheel, so there is none to send; build one with "
            "make wheel in knee's checkout and give it with --ship-wheel FILE"
        )
    out = Path(tempfile.mkdtemp(prefix="knee-ship-")) / f"knee-{version}-{tag}.whl"
    record = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as whl:
        for f in files:
            name = "/".join(f.parts)
            if f.parts[0] == info and f.name in _INSTALLER_FILES:
                continue
            data = Path(str(dist.locate_file(f))).read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
            whl.writestr(name, data)
        record.append(f"{info}/RECORD,,")
        whl.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return out


def job_prologue(python: str | None) -> tuple[list[str], str]:
    """The shell lines a batch job runs before its worker, and the Python that then runs the worker: a venv of the
    job's own (under the node's temporary directory, removed when the job ends), `python` (default python3) its
    base, with this driver's Dask version installed by pip. knee's wheel comes to the worker through Dask, as to
    any worker without knee (`Shipper`): the nodes need not see any of the driver's files."""
    import distributed

    lines = [
        "KNEE_VENV=`mktemp -d -t knee-job-XXXXXX`",  # no $( ): a submit description reads $(…) as its own macro
        # The venv goes with the job (its worker ended, or the job cancelled). The rm ignores SIGTERM: a batch
        # system that signals the job's processes again while it runs would leave part of the venv behind.
        "trap 'trap \"\" TERM; rm -rf $KNEE_VENV' EXIT",
        f"{python or 'python3'} -m venv $KNEE_VENV",
        # --no-compile: no byte code for modules the worker never imports (the job joins sooner, its venv goes faster)
        f"$KNEE_VENV/bin/python -m pip install -q --no-compile --disable-pip-version-check "
        f"distributed=={distributed.__version__}",
        "echo knee: this job runs its worker from $KNEE_VENV, where knee ships its own",  # in the job's log
    ]
    return lines, "$KNEE_VENV/bin/python"


def _package() -> Path:
    return Path(__file__).resolve().parents[1]  # knee/, where it runs from


@functools.cache
def driver_build() -> str:
    """This knee's build (`ship_worker.build_of` its package's Python files), as a worker's probe says its own."""
    from knee.executor.ship_worker import build_of

    return build_of(str(_package()))


def _wheel_sources(wheel: Path) -> dict[str, bytes]:
    """A wheel's knee files that its build counts (`ship_worker.sources`, as installed), by path."""
    with zipfile.ZipFile(wheel) as z:
        return {
            n.removeprefix("knee/"): z.read(n)
            for n in z.namelist()
            if n.startswith("knee/") and n.endswith((".py", ".pyi")) and "/__pycache__/" not in n
        }


def wheel_build(wheel: Path) -> str:
    """The build of the knee a wheel holds (its `knee/…py` files, as `ship_worker.build_of` reads them installed)."""
    from knee.executor.ship_worker import digest

    files = _wheel_sources(wheel)
    return digest((n, files[n]) for n in sorted(files))


def checked_wheel(ship: bool | str) -> Path:
    """`driver_wheel`, and that it holds this knee's build: a wheel made before the tree changed (dist/'s, after an
    edit) would make the workers another build than the driver. One sentence, naming a file that differs."""
    from knee.executor.ship_worker import digest, sources

    wheel = driver_wheel(ship)
    try:
        theirs = _wheel_sources(wheel)
    except (OSError, zipfile.BadZipFile) as e:
        raise UserError(f"--ship: {wheel} cannot be read as a wheel ({e}); build it with make wheel") from None
    if digest((n, theirs[n]) for n in sorted(theirs)) == driver_build():
        return wheel
    package = _package()
    ours = {n: (package / n).read_bytes() for n in sources(str(package))}
    differs = next((n for n in sorted(ours.keys() | theirs.keys()) if ours.get(n) != theirs.get(n)), "?")
    raise UserError(
        f"--ship: {wheel.name} is another build of knee {_version()} than the knee running here (its knee/{differs} "
        "differs): build it again with make wheel, or give this knee's with --ship-wheel FILE"
    )


def version_problem(worker: str, got: Any, version: str, *, shipped: bool, build: str | None = None) -> str | None:
    """What is wrong with the knee a worker has (`got`: its `ship_worker.probe`, or the exception asking it raised)
    for a driver of `version` and `build` (None: not compared), as one sentence that names the worker and the fix;
    None: nothing (or it is gone)."""
    if isinstance(got, BaseException):
        return f"cannot ask Dask worker {worker} which knee it has ({type(got).__name__}: {got})"
    if got is None:
        return None  # gone since it was listed: the step names it
    have = got["loaded"] or got["installed"]
    if have is None:
        return (
            f"Dask worker {worker} has no knee: install knee {version} there (its wheel: docs/distributed.md), or let "
            "knee install its own: --ship"
        )
    if have != version and shipped:
        return (
            f"Dask worker {worker} still runs knee {have} (loaded before knee {version} was shipped, and it has no "
            "nanny to restart it): restart the worker, then run knee again"
        )
    if have != version:
        return (
            f"Dask worker {worker} runs knee {have}, this knee is {version}: install the same version on every "
            "worker, or let knee install its own there: --ship"
        )
    if build is not None and got.get("build") not in (None, build):
        # the same version from another tree: what the driver and the workers send each other may differ
        return (
            f"Dask worker {worker} runs another build of knee {version} (its Python files differ from this knee's): "
            "install this knee's wheel on every worker, or let knee install its own there: --ship"
        )
    if build is not None and got["loaded"] is not None and got.get("loaded_build") not in (None, build):
        return (
            f"Dask worker {worker} runs another build of knee {version}, loaded before this one was installed over it"
            ": restart the worker, then run knee again"
        )
    return None


class Shipper:
    """The driver's wheel, installed on the Dask workers that do not run this knee (`ensure`)."""

    def __init__(self, ship: bool | str) -> None:
        self.wheel = checked_wheel(ship)
        self.version = _version()
        self.build = driver_build()
        self._data: bytes | None = None

    def ensure(self, client: Any, workers: Sequence[Any]) -> None:
        """Install the wheel where `workers` (LoadGenerators) do not have this knee: once per Python environment
        (host and prefix), then restart, through its nanny, a worker that had another knee loaded. A failed
        install is one sentence naming the worker and what pip said."""
        remote = by_value()
        found = client.run(remote.probe, workers=[w.address for w in workers], on_error="return")
        todo: dict[tuple[str, str], Any] = {}
        for w in workers:
            got = found.get(w.address)
            if isinstance(got, dict) and (got["installed"], got.get("build")) != (self.version, self.build):
                todo.setdefault((w.host, got["prefix"]), w)
        # the same version from another tree is replaced; none, or another version, installed as pip does
        for replace in (False, True):
            these = [w for w in todo.values() if (found[w.address]["installed"] == self.version) == replace]
            if not these:
                continue
            if self._data is None:
                self._data = self.wheel.read_bytes()
            said = client.run(
                remote.install,
                self._data,
                self.wheel.name,
                replace,
                workers=[w.address for w in these],
                on_error="return",
            )
            for w in these:
                why = said.get(w.address)
                if why:
                    raise UserError(f"--ship: installing {self.wheel.name} on Dask worker {w.named} failed: {why}")
        stale = [w.address for w in workers if self._stale(found.get(w.address))]
        if stale:
            self._restart(client, stale)

    def _stale(self, got: Any) -> bool:
        """The worker's process has another knee loaded: another version, or this one's from another build (the one
        it ran its shards with; else the files it has, read before the install)."""
        if not isinstance(got, dict) or got["loaded"] is None:
            return False
        return got["loaded"] != self.version or (got.get("loaded_build") or got.get("build")) != self.build

    @staticmethod
    def _restart(client: Any, addresses: list[str]) -> None:
        """Restart workers that have another knee loaded (a process cannot load a second one): through their
        nannies; a worker without one is left to the version check, which names it."""
        info = client.scheduler_info(n_workers=-1)["workers"]
        with_nanny = [a for a in addresses if info.get(a, {}).get("nanny")]
        if with_nanny:
            n = len(info)
            client.restart_workers(workers=with_nanny, timeout=RESTART_TIMEOUT_S, raise_for_error=False)
            client.wait_for_workers(n, timeout=RESTART_TIMEOUT_S)
