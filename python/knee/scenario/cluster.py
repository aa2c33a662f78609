"""`[cluster]`: where the steps run (docs/distributed.md, docs/scenarios.md). This machine (no address), a Dask
cluster (`address`), or workers that knee asks a batch system for (`jobqueue`, through dask-jobqueue: `jobs`
and what each job asks for); and the driver's lease, which stops the load on the workers when the driver is
gone (knee.executor.lease)."""

import contextlib
import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from knee.errors import UserError
from knee.scenario.fields import Duration, PositiveInt, Table
from knee.scenario.units import parse_duration

DEFAULT_LEASE_S = 5.0  # a shard whose driver is gone stops within this (knee.executor.lease)
MIN_LEASE_S = 2.0
DEFAULT_JOB_WAIT_S = 600.0  # how long knee waits for the batch jobs' workers to join
# What each job asks for when neither [cluster] nor the site's dask-jobqueue configuration says.
DEFAULT_JOB: dict[str, int | str] = {"cores": 1, "memory": "2GB", "disk": "1GB"}

# The batch systems knee asks for jobs through dask-jobqueue, and what each calls itself.
JobQueue = Literal["slurm", "htcondor", "pbs", "sge"]
JOBQUEUE_NAMES: dict[str, str] = {"slurm": "Slurm", "htcondor": "HTCondor", "pbs": "PBS", "sge": "SGE"}
# Keys that only some batch systems take (dask-jobqueue has no HTCondor queue, account or wall time: a submit
# description says those with its own attributes, in `directives`).
_ONLY_FOR = {
    "walltime": ("slurm", "pbs", "sge"),
    "queue": ("slurm", "pbs", "sge"),
    "account": ("slurm", "pbs", "sge"),
    "disk": ("htcondor",),
}

_BYTES = re.compile(r"^\s*\d+(\.\d+)?\s*([kmgtp]i?)?b\s*$", re.IGNORECASE)
_CLOCK = re.compile(r"^(?:(\d+)-)?(\d+(?::\d{1,2}){0,2})$")


def _bytes(value: Any) -> Any:
    """A size as dask-jobqueue takes it: "4GB", "512 MiB"."""
    if isinstance(value, str) and _BYTES.match(value):
        return value.strip()
    raise ValueError('must be a size like "4GB" or "512MiB"')


def _walltime(value: Any) -> Any:
    """A job's wall time as batch systems write it ("HH:MM:SS", "MM:SS", "D-HH[:MM[:SS]]") or a duration like "2h"
    → "HH:MM:SS", which Slurm, PBS and SGE all read. A bare number is refused: minutes to Slurm, seconds to PBS."""
    total = 0
    text = value.strip() if isinstance(value, str) else ""
    clock = _CLOCK.match(text)
    if clock:
        days, fields = clock.group(1), [int(f) for f in clock.group(2).split(":")]
        if days is not None:  # D-H, D-H:M, D-H:M:S
            fields = [int(days) * 24 + fields[0], *fields[1:], 0, 0][:3]
        if len(fields) == 2:  # M:S
            fields = [0, *fields]
        if len(fields) == 3:
            total = fields[0] * 3600 + fields[1] * 60 + fields[2]
    elif text and not text.replace(".", "", 1).isdigit():
        with contextlib.suppress(UserError):
            total = round(parse_duration(text, "walltime"))
    if total > 0:
        return f"{total // 3600:02d}:{total // 60 % 60:02d}:{total % 60:02d}"
    raise ValueError('must be a wall time like "02:00:00" or a duration like "2h"')


Bytes = Annotated[str, BeforeValidator(_bytes)]
Walltime = Annotated[str, BeforeValidator(_walltime)]
Words = Annotated[str, Field(min_length=1)]


class Cluster(Table):
    """Where the steps run: this machine (no address, no jobqueue), a Dask cluster (`address`), or batch jobs
    (`jobqueue`, or `--cluster KIND:JOBS`, which takes the job keys from here too)."""

    address: Words | None = None  # tcp://host:8786, or local:N worker processes
    weights: dict[str, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)  # host -> share of clients
    lease: Annotated[Duration, Field(ge=MIN_LEASE_S, le=3600)] = DEFAULT_LEASE_S
    # batch jobs through dask-jobqueue, one Dask worker (one load generator) a job
    jobqueue: JobQueue | None = None
    jobs: PositiveInt = 1
    min_jobs: PositiveInt | None = None  # start once this many have joined (default: all of them)
    wait: Annotated[Duration, Field(gt=0)] = DEFAULT_JOB_WAIT_S
    cores: PositiveInt | None = None  # each job's cores, its worker's threads (default: the site's dask config, or 1)
    memory: Bytes | None = None
    walltime: Walltime | None = None
    queue: Words | None = None
    account: Words | None = None
    disk: Bytes | None = None
    directives: list[str] | dict[str, str] = Field(default_factory=list)  # the batch system's own, as written
    prologue: list[str] = Field(default_factory=list)  # shell lines each job runs before its worker
    python: Words | None = None  # the jobs' Python (default: this one)
    host: Words | None = None  # the address the jobs reach this machine's scheduler on
    port: Annotated[int, Field(ge=0, le=65535)] = 0
    logs: Words | None = None  # where the jobs write their output (default: the batch system's)
    # install the driver's own knee (its wheel: true, or the file) on workers that lack it (knee.executor.ship)
    ship: bool | Words = False

    @model_validator(mode="after")
    def _one_place(self) -> "Cluster":
        if self.address is not None and self.jobqueue is not None:
            raise ValueError("give address (a running Dask scheduler) or jobqueue (batch jobs knee asks for), not both")
        if self.jobqueue is not None:
            problem = jobqueue_problem(self, self.jobqueue)
            if problem:
                raise ValueError(problem)
        return self

    def ship_with(self, ship: bool | str, *, elsewhere: bool, named: str, fix: str) -> None:
        """`ship` (True, or a wheel's path), from `--ship` or the Python API's `ship=`, as this table's `ship`. Refused
        in one sentence, naming it as `named` and saying `fix`, when there is no cluster to ship to: none here, and
        none given `elsewhere` (`--cluster`, `client=`)."""
        if not ship:
            return
        if not (elsewhere or self.address or self.jobqueue):
            raise UserError(f"{named} installs knee on a cluster's workers: give {fix}")
        self.ship = ship

    def started_with(self) -> int:
        """How many jobs' workers the sweep waits for before its first step."""
        return min(self.min_jobs or self.jobs, self.jobs)


def jobqueue_problem(settings: Cluster, kind: str) -> str | None:
    """What in `settings` the batch system `kind` cannot take, as a sentence naming the key; None: nothing."""
    name = JOBQUEUE_NAMES[kind]
    for key, kinds in _ONLY_FOR.items():
        if getattr(settings, key) is not None and kind not in kinds:
            where = "a directive" if kind != "htcondor" else "directives, as the submit description's own attribute"
            return f"{key} is not a key for {name} jobs: remove it, or say it in {where}"
    if kind == "htcondor" and isinstance(settings.directives, list) and settings.directives:
        return 'directives must be a table for HTCondor jobs, like {"+JobFlavour" = "\\"workday\\""}'
    if kind != "htcondor" and isinstance(settings.directives, dict):
        return f'directives must be a list for {name} jobs, like ["--exclusive"]'
    if settings.min_jobs is not None and settings.min_jobs > settings.jobs:
        return f"min_jobs ({settings.min_jobs}) must not be more than jobs ({settings.jobs})"
    return None
