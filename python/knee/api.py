"""knee from Python: `knee.run` (one level) and `knee.sweep` (a whole sweep), for scripts and notebooks.

    >>> import knee
    >>> r = knee.run("http://127.0.0.1:8080/", clients=50, n=20000)    # doctest: +SKIP
    >>> r.stats.succeeded, r.stats.rate_hz, r.stats.latency_ms.p99      # doctest: +SKIP
    >>> s = knee.sweep("http://127.0.0.1:8080/", levels=[5, 20, 50], duration="10s", out="runs")  # doctest: +SKIP
    >>> s.verdict.peak_level, s.dataframe()                             # doctest: +SKIP

TARGET is an `http(s)://` URL, `tcp://host:port`, or a command as a list of arguments
(`["curl", "-s", "http://…"]`, run without a shell). Both take the options of the command line as
keywords (`clients`, `duration="30s"`, `headers=["X-Token: ${token}"]`, `secrets={"token": …}` …) and
go the same road as `knee run` and `knee sweep`: a Scenario, a plan, the runner.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from rich.console import Console

from knee.engine import ShardResult, summary
from knee.executor.interrupt import in_callers_process
from knee.model import GroupStats, RunRecord, StepResult, Verdict
from knee.model.engine_summary import EngineSummary
from knee.scenario import Loaded, Scenario, Source, from_raw, read_scenario
from knee.scenario.lineopts import OPTION_NAMES
from knee.scenario.messages import cannot_read
from knee.scenario.oneline import Options, scenario_table
from knee.spec import EngineSpec

Target = str | Sequence[str]


@dataclass
class RunResult:
    """What `knee.run` returns: the engine's mergeable result plus the friendly view of it."""

    result: ShardResult
    stats: GroupStats
    step: StepResult
    spec: EngineSpec
    interrupted: bool = False
    run_dir: Path | None = None

    @property
    def summary(self) -> EngineSummary:
        """The engine's summary of the result (µs, counts, percentiles, series)."""
        return summary(self.result)


@dataclass
class Run:
    """What `knee.sweep` returns: the run record, its verdicts and per-level table, its directory."""

    record: RunRecord
    run_dir: Path | None
    exit_code: int

    @property
    def verdicts(self) -> list[Verdict]:
        return self.record.verdicts

    @property
    def verdict(self) -> Verdict | None:
        """The verdict on the measured group (the one whose level the sweep varies)."""
        return next((v for v in self.record.verdicts if v.group == self.record.measured_group), None)

    def levels(self) -> list[dict[str, Any]]:
        """One record per step and group (and per step and request of a mix, `request` set): the rows of levels.csv."""
        from knee.report.view import build

        return [r.as_dict() for r in build(self.record).csv_rows]

    def dataframe(self) -> Any:
        """The per-level table as a pandas DataFrame (needs pandas installed)."""
        try:
            import pandas as pd
        except ImportError:
            from knee.errors import UserError

            raise UserError("Run.dataframe() needs pandas: pip install pandas (or use Run.levels())") from None
        return pd.DataFrame(self.levels())


def _loaded(target: Target | None, scenario: str | Path | Scenario | None, run: bool, kw: dict[str, Any]) -> Loaded:
    variables = kw.pop("variables", None) or {}
    secrets = kw.pop("secrets", None) or {}
    if scenario is not None:
        if target is not None or kw:
            from knee.errors import UserError

            raise UserError("give either a scenario or a target with options, not both")
        if isinstance(scenario, Scenario):
            return from_raw(scenario.model_dump(mode="json", exclude_none=True), Source("scenario"), variables, secrets)
        path = Path(scenario)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise cannot_read(path, exc) from None
        except UnicodeDecodeError:
            from knee.errors import UserError

            raise UserError(f"scenario {str(path)!r} is not a text (UTF-8) file; give a scenario's TOML file") from None
        return read_scenario(text, path.name, variables, secrets)
    if target is None:
        from knee.errors import UserError

        raise UserError("give a target (a URL, tcp://host:port or a command as a list) or a scenario")
    known = {f.name for f in fields(Options)}
    unknown = sorted(set(kw) - known)
    if unknown:
        from knee.errors import UserError

        raise UserError(
            f"unknown option {unknown[0]!r}; the options are those of knee run / knee sweep: {sorted(known)}"
        )
    headers = kw.get("headers")
    if isinstance(headers, dict):  # headers={"X-A": "1"}, as requests and httpx take them
        kw["headers"] = [f"{name}: {value}" for name, value in headers.items()]
    elif isinstance(headers, str):
        kw["headers"] = [headers]
    options = Options(**kw)
    table = scenario_table(target if isinstance(target, str) else list(target), options, run=run)
    return from_raw(table, Source("knee.run" if run else "knee.sweep", options=OPTION_NAMES), variables, secrets)


def run(
    target: Target,
    *,
    clients: int = 1,
    rate: float | None = None,
    out: str | Path | None = None,
    check: bool = True,
    console: Console | None = None,
    client: Any = None,
    ship: bool | str = False,
    serve: str | None = None,
    **options: Any,
) -> RunResult:
    """Drive `target` with `clients` closed-loop clients (or, with `rate`, an open loop of that many
    arrivals per second over `clients` connections) and return what happened.

    Stops after `n` operations in all, `iterations` per client, or `duration` (10 s if none is given).
    `timeout`: an operation still running after it is hung. `check`: refuse to start (UserError) if
    the target cannot be reached at all. `out`: keep a run directory there. `client`: a
    `distributed.Client` whose workers run the load (left open); `ship`: install this knee's wheel on the workers
    that lack it (True, or the wheel's path: `--ship`, docs/distributed.md). On Ctrl-C the partial result
    is returned with `interrupted=True`; a second Ctrl-C stops at once by raising KeyboardInterrupt (a notebook's
    kernel goes on), as does a first before the step began. `serve`: "[HOST:]PORT" to serve the live page and
    `/metrics` on (docs/live.md).
    """
    from knee.runner import execute, start_run
    from knee.scenario.address import parse_serve

    where = parse_serve(serve, "serve")

    if rate is not None and options.get("rates") is not None:
        from knee.errors import UserError

        raise UserError("give rate (one rate) or rates (a step each), not both")
    rates = [rate] if rate is not None else options.pop("rates", None)
    loaded = _loaded(target, None, True, dict(options, clients=clients, rates=rates))
    scenario, run_dir = start_run(loaded, Path(out) if out is not None else None, "run")
    with in_callers_process(), _executor(client, scenario, ship) as executor:
        outcome = execute(
            scenario,
            run_dir,
            console or Console(quiet=True),
            executor=executor,
            progress=_Quiet(),
            show=False,
            write=run_dir.kept,
            check=None if check else (lambda s: []),
            serve=where,
        )
    if not outcome.record.steps:  # Ctrl-C before the step began (a cluster's workers not yet ready): nothing ran
        raise KeyboardInterrupt
    step = outcome.record.steps[-1]
    from knee.plan import PlannedStep, engine_spec

    planned = PlannedStep(step.level, step.label, step.direction, step.phase)
    return RunResult(
        result=outcome.results[-1],
        stats=step.groups[scenario.measured_group],
        step=step,
        spec=engine_spec(loaded.record, planned, record=True),
        interrupted=outcome.interrupted,
        run_dir=run_dir.path if run_dir.kept else None,
    )


def sweep(
    target: Target | None = None,
    *,
    scenario: str | Path | Scenario | None = None,
    out: str | Path | None = "runs",
    console: Console | None = None,
    quick: bool = False,
    client: Any = None,
    ship: bool | str = False,
    serve: str | None = None,
    **options: Any,
) -> Run:
    """Run a sweep: of `target` with the options of `knee sweep TARGET` (`levels=[5, 20, 50]` or
    `rates=[…]`, `duration`, `slo_p99` …), or of a `scenario` (a TOML file's path or a Scenario).
    Returns the run: `.verdict`, `.levels()`, `.dataframe()`, `.run_dir`. `out=None` keeps no directory.
    `client`: a `distributed.Client` (of a LocalCluster, dask-jobqueue's HTCondorCluster or SLURMCluster,
    dask-kubernetes …) whose workers run the load; it is left open. `ship`: install this knee's wheel on the workers
    that lack it (True, or the wheel's path: `--ship`, docs/distributed.md). `serve`: "[HOST:]PORT" to serve the live
    page and `/metrics` on while it runs (docs/live.md)."""
    from knee.runner import execute, start_run
    from knee.scenario.address import parse_serve

    where = parse_serve(serve, "serve")

    loaded = _loaded(target, scenario, False, dict(options))
    sc, run_dir = start_run(loaded, Path(out) if out is not None else None, "sweep", shorten=quick)
    with in_callers_process(), _executor(client, sc, ship) as executor:
        outcome = execute(
            sc, run_dir, console or Console(quiet=True), executor=executor, write=run_dir.kept, serve=where
        )
    return Run(outcome.record, run_dir.path if run_dir.kept else None, outcome.code)


@contextlib.contextmanager
def _executor(client: Any, scenario: Scenario, ship: bool | str) -> Iterator[Any]:
    """The Dask executor on the caller's `distributed.Client`, or None (the scenario's own choice). Closed at the
    end (the driver's lease ends with it); the caller's client is left open. `ship` (or the scenario's `[cluster]
    ship`): install this knee on the workers that lack it."""
    fix = "client= (a distributed.Client) too, or a scenario with a [cluster]"
    scenario.cluster.ship_with(ship, elsewhere=client is not None, named=f"ship={ship!r}", fix=fix)
    if client is None:
        yield None
        return
    from knee.executor.dask import DaskExecutor

    settings = scenario.cluster
    executor = DaskExecutor(client, settings.weights, lease_s=settings.lease, ship=settings.ship)
    try:
        yield executor
    finally:
        executor.close()


class _Quiet:
    """No progress display (the Python API)."""

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def begin(self, number: int, total: int, step: object) -> None:
        pass

    def update(self, snapshot: object) -> None:
        pass

    def end(self, step: object) -> None:
        pass
